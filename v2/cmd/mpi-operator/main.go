// Command mpi-operator-v2 runs the controller of kubeflow.org/v2beta1
// MPIJobs.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/kubeflow/mpi-operator/pkg/operator"
	"github.com/kubeflow/mpi-operator/pkg/version"
	"github.com/kubeflow/mpi-operator/v2/cmd/mpi-operator/app"
)

func main() {
	os.Exit(run())
}

func run() int {
	defer klog.Flush()
	opts, err := app.ParseArgs(os.Args[1:], os.Stderr)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2 // the error has been printed
	}
	if opts.PrintVersion {
		fmt.Println(version.String())
		return 0
	}
	if err := opts.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "mpi-operator-v2: invalid flags:\n%v\n", err)
		return 2
	}
	// SIGTERM or SIGINT starts a graceful stop; a second one kills the
	// process at once.
	ctx, stop := operator.SignalContext(context.Background())
	defer stop()
	if err := app.Run(ctx, opts); err != nil {
		klog.Flush()
		fmt.Fprintf(os.Stderr, "mpi-operator-v2: %v\n", err)
		return 1
	}
	klog.InfoS("mpi-operator-v2 stopped")
	return 0
}
