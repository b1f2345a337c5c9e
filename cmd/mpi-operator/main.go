// Command mpi-operator runs the controller of kubeflow.org/v1 MPIJobs.
package main

import (
	"os"

	"github.com/kubeflow/mpi-operator/cmd/mpi-operator/app"
	"github.com/kubeflow/mpi-operator/pkg/operator"
)

func main() {
	os.Exit(operator.Main("mpi-operator", os.Args[1:], os.Stdout, os.Stderr, app.ParseArgs, app.Run))
}
