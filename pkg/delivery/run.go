package delivery

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// ClientFunc returns a Kubernetes client. Run only calls it when it has pods
// to wait for, so a run that only copies kubectl needs no cluster access.
type ClientFunc func() (kubernetes.Interface, error)

// Run does the whole job of the init container: it installs kubectl, then
// waits for the workers described by cfg.
func Run(ctx context.Context, cfg Config, newClient ClientFunc) error {
	logger := klog.FromContext(ctx)
	if err := InstallKubectl(ctx, cfg); err != nil {
		return err
	}
	if !cfg.NeedsWait() {
		logger.Info("Not waiting for worker pods", "minReadyWorkers", cfg.MinReadyWorkers)
		return nil
	}

	client, err := newClient()
	if err != nil {
		return fmt.Errorf("creating Kubernetes client: %w", err)
	}

	if cfg.UsesHostfile() {
		logger.Info("No worker selector given; waiting for every worker in the hostfile",
			"hostfile", cfg.HostfilePath, "workers", len(cfg.HostfileWorkers), "launcher", cfg.PodName)
		if err := WaitForNamedPods(ctx, client, cfg.Namespace, cfg.HostfileWorkers); err != nil {
			return fmt.Errorf("waiting for hostfile workers: %w", err)
		}
	} else {
		selector, err := labels.Parse(cfg.WorkerSelector)
		if err != nil {
			return fmt.Errorf("parsing worker selector %q: %w", cfg.WorkerSelector, err)
		}
		if err := WaitForReadyWorkers(ctx, client, cfg.Namespace, selector, cfg.MinReadyWorkers); err != nil {
			return fmt.Errorf("waiting for workers: %w", err)
		}
	}
	logger.Info("Worker pods are ready")
	return nil
}
