// Command mpi-operator-v2 runs the controller of kubeflow.org/v2beta1
// MPIJobs.
package main

import (
	"os"

	"github.com/kubeflow/mpi-operator/pkg/operator"
	"github.com/kubeflow/mpi-operator/v2/cmd/mpi-operator/app"
)

func main() {
	os.Exit(operator.Main("mpi-operator-v2", os.Args[1:], os.Stdout, os.Stderr, app.ParseArgs, app.Run))
}
