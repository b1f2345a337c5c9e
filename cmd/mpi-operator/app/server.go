package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	volcanoclient "volcano.sh/apis/pkg/client/clientset/versioned"

	clientset "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned"
	"github.com/kubeflow/mpi-operator/pkg/controller"
	"github.com/kubeflow/mpi-operator/pkg/operator"
	"github.com/kubeflow/mpi-operator/pkg/version"
)

const (
	userAgent = "mpi-operator"
	// leaseName is the name of the leader-election Lease in --lock-namespace.
	leaseName = "mpi-operator"

	mpiJobGroupVersion   = "kubeflow.org/v1"
	mpiJobResource       = "mpijobs"
	podGroupGroupVersion = "scheduling.volcano.sh/v1beta1"
	podGroupResource     = "podgroups"

	// discoveryTimeout bounds the start-up CRD checks, so that an
	// unreachable API server fails the start instead of hanging it.
	discoveryTimeout = 30 * time.Second
)

// clients bundles the API clients of the operator.
type clients struct {
	kube    kubernetes.Interface
	events  kubernetes.Interface // the same API, its own rate limits
	meta    metadata.Interface   // objects' metadata only, for caches of other pods
	mpi     clientset.Interface
	volcano volcanoclient.Interface // nil when gang scheduling is off
}

// Run starts the operator with validated options and blocks until ctx is
// cancelled, which is a graceful stop and returns nil, or until something
// fails, which returns the error. Losing the leader Lease outside a stop
// exits the process with status 1.
func Run(ctx context.Context, opts *Options) error {
	klog.InfoS("Starting mpi-operator", "version", version.String(),
		"namespace", namespaceForLog(opts.Namespace), "threadiness", opts.Threadiness,
		"gangScheduling", opts.GangSchedulerName, "leaderElect", opts.LeaderElect,
		"qps", opts.QPS, "burst", opts.Burst)

	cfg, err := restConfig(opts)
	if err != nil {
		return err
	}
	cs, err := newClients(cfg, opts.GangSchedulerName != "")
	if err != nil {
		return err
	}

	dcfg := rest.CopyConfig(cfg)
	dcfg.Timeout = discoveryTimeout
	disc, err := discovery.NewDiscoveryClientForConfig(dcfg)
	if err != nil {
		return fmt.Errorf("creating the discovery client: %w", err)
	}
	if err := checkMPIJobCRD(disc); err != nil {
		return err
	}
	if opts.GangSchedulerName != "" {
		if err := checkPodGroupCRD(disc, opts.GangSchedulerName); err != nil {
			return err
		}
	}

	return operator.Serve(ctx, operator.ServeOptions{
		MonitoringPort: opts.MonitoringPort,
		LeaderElect:    opts.LeaderElect,
		LockNamespace:  opts.LockNamespace,
		LeaseName:      leaseName,
		Kube:           cs.kube,
	}, func(ctx context.Context, running *operator.RunningController) error {
		return runController(ctx, cs, opts, running)
	})
}

func namespaceForLog(ns string) string {
	if ns == "" {
		return "(all)"
	}
	return ns
}

// restConfig returns the client configuration of the options (see
// operator.BuildRestConfig).
func restConfig(o *Options) (*rest.Config, error) {
	return o.RestConfig(userAgent)
}

// newClients creates the API clients. The built-in types are spoken in
// protobuf, which is cheaper to decode than JSON; custom resources only
// support JSON, so the MPIJob and volcano clients keep the default.
func newClients(cfg *rest.Config, gang bool) (clients, error) {
	var cs clients
	kcfg := rest.CopyConfig(cfg)
	kcfg.ContentType = runtime.ContentTypeProtobuf
	kcfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	kube, err := kubernetes.NewForConfig(kcfg)
	if err != nil {
		return cs, fmt.Errorf("creating the Kubernetes client: %w", err)
	}
	cs.kube = kube
	// Events get a client, and so a rate limiter, of their own.
	if cs.events, err = kubernetes.NewForConfig(kcfg); err != nil {
		return cs, fmt.Errorf("creating the events client: %w", err)
	}
	if cs.meta, err = metadata.NewForConfig(cfg); err != nil {
		return cs, fmt.Errorf("creating the metadata client: %w", err)
	}
	mpi, err := clientset.NewForConfig(cfg)
	if err != nil {
		return cs, fmt.Errorf("creating the MPIJob client: %w", err)
	}
	cs.mpi = mpi
	if gang {
		vc, err := volcanoclient.NewForConfig(cfg)
		if err != nil {
			return cs, fmt.Errorf("creating the volcano client: %w", err)
		}
		cs.volcano = vc
	}
	return cs, nil
}

// checkMPIJobCRD fails unless the API server serves MPIJobs with their
// status subresource.
func checkMPIJobCRD(d discovery.DiscoveryInterface) error {
	names, err := operator.ServedResources(d, mpiJobGroupVersion)
	if err != nil {
		return fmt.Errorf("checking whether the MPIJob CRD is installed: cannot list the resources of %s: %w", mpiJobGroupVersion, err)
	}
	if !names[mpiJobResource] {
		return fmt.Errorf("the MPIJob CRD is not installed: the API server does not serve %s in %s. "+
			"Install the CRD with `kubectl apply -f manifests/base/crd.yaml`, or the CRD and the operator with "+
			"`kubectl apply -k manifests/overlays/standalone`, then start the operator again",
			mpiJobResource, mpiJobGroupVersion)
	}
	if !names[mpiJobResource+"/status"] {
		return errors.New("the installed MPIJob CRD has no status subresource, so the operator cannot report job status. " +
			"Update it with `kubectl apply -f manifests/base/crd.yaml`, then start the operator again")
	}
	return nil
}

// checkPodGroupCRD fails unless the API server serves volcano PodGroups,
// which gang scheduling creates.
func checkPodGroupCRD(d discovery.DiscoveryInterface, scheduler string) error {
	names, err := operator.ServedResources(d, podGroupGroupVersion)
	if err != nil {
		return fmt.Errorf("checking whether the volcano PodGroup CRD is installed: cannot list the resources of %s: %w", podGroupGroupVersion, err)
	}
	if !names[podGroupResource] {
		return fmt.Errorf("--gang-scheduling=%s needs volcano, but the API server does not serve %s in %s. "+
			"Install volcano (https://volcano.sh/en/docs/installation/), or start the operator without --gang-scheduling",
			scheduler, podGroupResource, podGroupGroupVersion)
	}
	return nil
}

// runController runs the MPIJob controller until ctx is done, publishing it
// in running meanwhile. It returns nil on a stop and an error when the
// controller fails or returns early.
func runController(ctx context.Context, cs clients, o *Options, running *operator.RunningController) error {
	cfg := controller.Config{
		Namespace:            o.Namespace,
		KubectlDeliveryImage: o.KubectlDeliveryImage,
		GangSchedulerName:    o.GangSchedulerName,
		RefreshLauncher:      o.RefreshLauncher,
	}
	var vc volcanoclient.Interface // a nil interface, not a typed nil pointer
	if cs.volcano != nil {
		vc = cs.volcano
	}
	// The informers get a context of their own, so that they stop, and
	// their watches close, before this function returns, whatever made the
	// controller return.
	infCtx, stopInformers := context.WithCancel(ctx)
	cfg.EventClient = cs.events
	inf := controller.NewInformers(cs.kube, cs.meta, cs.mpi, vc, cfg)
	defer func() {
		stopInformers()
		inf.Shutdown()
	}()
	c := controller.NewMPIJobController(ctx, cs.kube, cs.mpi, vc, inf, cfg)
	running.Set(c)
	defer running.Clear()
	inf.Start(infCtx.Done())
	err := c.Run(ctx, o.Threadiness)
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
