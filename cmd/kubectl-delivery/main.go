// Command kubectl-delivery is the init container of an MPIJob launcher. It
// installs kubectl into a shared volume and waits for the job's workers; see
// package delivery for the environment variables it reads.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/kubeflow/mpi-operator/pkg/delivery"
	"github.com/kubeflow/mpi-operator/pkg/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

func main() {
	klog.InitFlags(nil)
	printVersion := flag.Bool("version", false, "Print the version and exit.")
	flag.Parse()
	if *printVersion {
		fmt.Println(version.String())
		return
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	ctx = klog.NewContext(ctx, klog.Background())
	err := run(ctx)
	stop()
	klog.Flush()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubectl-delivery: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, err := delivery.LoadConfig(delivery.OSEnvironment())
	if err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	return delivery.Run(ctx, cfg, inClusterClient)
}

func inClusterClient() (kubernetes.Interface, error) {
	config, err := rest.InClusterConfig()
	if err != nil {
		return nil, err
	}
	config.UserAgent = "kubectl-delivery"
	return kubernetes.NewForConfig(config)
}
