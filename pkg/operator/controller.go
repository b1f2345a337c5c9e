package operator

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// KubeClients are the clients of the built-in API that every operator
// binary needs.
type KubeClients struct {
	// Kube reads and writes the built-in types, in protobuf, which is
	// cheaper to decode than JSON. The requests of urgent syncs spend a
	// budget of their own (byPriority).
	Kube kubernetes.Interface
	// Events is the same API with a rate limiter of its own, so that a
	// burst of events never holds up the controller's writes.
	Events kubernetes.Interface
	// Creations is the same API with a rate limiter of its own too, for
	// the creation of pods: a large job's creations run at the full rate
	// limit and never hold up the writes that list its running workers.
	Creations kubernetes.Interface
	// Meta reads objects' metadata only, for caches of other pods.
	Meta metadata.Interface
	// Dynamic lists and watches MPIJobs as unstructured JSON, so that
	// each is decoded on its own (pkg/tolerant).
	Dynamic dynamic.Interface
}

// NewKubeClients creates the clients of the built-in API from cfg.
// Custom resources only speak JSON, so their clients should take cfg as
// it is.
func NewKubeClients(cfg *rest.Config) (KubeClients, error) {
	var cs KubeClients
	kcfg := rest.CopyConfig(cfg)
	kcfg.ContentType = runtime.ContentTypeProtobuf
	kcfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	var err error
	// The requests of urgent syncs have a budget of their own.
	main := rest.CopyConfig(kcfg)
	if main.RateLimiter == nil && main.QPS > 0 {
		main.RateLimiter = newByPriority(main.QPS, main.Burst)
	}
	if cs.Kube, err = kubernetes.NewForConfig(main); err != nil {
		return cs, fmt.Errorf("creating the Kubernetes client: %w", err)
	}
	if cs.Events, err = kubernetes.NewForConfig(kcfg); err != nil {
		return cs, fmt.Errorf("creating the events client: %w", err)
	}
	if cs.Creations, err = kubernetes.NewForConfig(kcfg); err != nil {
		return cs, fmt.Errorf("creating the pod creations client: %w", err)
	}
	if cs.Meta, err = metadata.NewForConfig(cfg); err != nil {
		return cs, fmt.Errorf("creating the metadata client: %w", err)
	}
	if cs.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return cs, fmt.Errorf("creating the dynamic client: %w", err)
	}
	return cs, nil
}

// Requirement is a resource the operator cannot run without, and what to
// tell the user when the API server does not serve it.
type Requirement struct {
	// What names the requirement in messages, e.g. "the MPIJob CRD".
	What string
	// GroupVersion and Resource are what the API server must serve.
	GroupVersion, Resource string
	// Status, when true, requires the status subresource too.
	Status bool
	// Missing tells the user what to do when the resource is not served;
	// MissingStatus when it is served without its status subresource.
	Missing, MissingStatus string
}

// CheckServed fails, with the requirement's advice, unless the API server
// serves the resource (and its status subresource when required).
func CheckServed(d discovery.DiscoveryInterface, r Requirement) error {
	names, err := ServedResources(d, r.GroupVersion)
	if err != nil {
		return fmt.Errorf("checking whether %s is installed: cannot list the resources of %s: %w", r.What, r.GroupVersion, err)
	}
	if !names[r.Resource] {
		return fmt.Errorf("%s is not installed: the API server does not serve %s in %s. %s",
			r.What, r.Resource, r.GroupVersion, r.Missing)
	}
	if r.Status && !names[r.Resource+"/status"] {
		return errors.New(r.MissingStatus)
	}
	return nil
}

// Controller is what RunController runs.
type Controller interface {
	HealthChecker
	// Run waits for the caches and reconciles until ctx is done.
	Run(ctx context.Context, threadiness int) error
}

// Informers are the caches a controller reads.
type Informers interface {
	Start(stop <-chan struct{})
	// Shutdown waits until every started informer has stopped.
	Shutdown()
}

// RunController builds the informers and the controller with build, runs
// the controller with threadiness workers until ctx is done and publishes
// it in running meanwhile, for /healthz. It returns nil on a stop, and an
// error when the controller fails or returns early. The informers stop,
// and their watches close, before it returns, whatever made the controller
// return.
func RunController(ctx context.Context, running *RunningController, threadiness int,
	build func(ctx context.Context) (Informers, Controller)) error {
	infCtx, stopInformers := context.WithCancel(ctx)
	inf, c := build(ctx)
	defer func() {
		stopInformers()
		inf.Shutdown()
	}()
	running.Set(c)
	defer running.Clear()
	inf.Start(infCtx.Done())
	err := c.Run(ctx, threadiness)
	if ctx.Err() != nil {
		// Stopping; an error here is the wait for the caches being cut short.
		if err != nil {
			klog.V(2).InfoS("Controller stopped", "err", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("running the MPIJob controller: %w", err)
	}
	return errors.New("the MPIJob controller stopped unexpectedly")
}
