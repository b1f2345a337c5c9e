package app

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	volcanoclient "volcano.sh/apis/pkg/client/clientset/versioned"

	clientset "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned"
	"github.com/kubeflow/mpi-operator/pkg/controller"
	"github.com/kubeflow/mpi-operator/pkg/engine"
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
	creates kubernetes.Interface // the same again, for pod creations
	meta    metadata.Interface   // objects' metadata only, for caches of other pods
	dynamic dynamic.Interface    // MPIJobs as JSON, decoded one by one
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

	return operator.Serve(ctx, opts.ServeOptions(leaseName, cs.kube), func(ctx context.Context, running *operator.RunningController) error {
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

// newClients creates the API clients: the built-in ones of pkg/operator,
// and the MPIJob and volcano clients, which speak JSON.
func newClients(cfg *rest.Config, gang bool) (clients, error) {
	kc, err := operator.NewKubeClients(cfg)
	if err != nil {
		return clients{}, err
	}
	cs := clients{kube: kc.Kube, events: kc.Events, creates: kc.Creations, meta: kc.Meta, dynamic: kc.Dynamic}
	if cs.mpi, err = clientset.NewForConfig(cfg); err != nil {
		return cs, fmt.Errorf("creating the MPIJob client: %w", err)
	}
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
	return operator.CheckServed(d, operator.Requirement{
		What:         "the MPIJob CRD",
		GroupVersion: mpiJobGroupVersion,
		Resource:     mpiJobResource,
		Status:       true,
		Missing: "Install the CRD with `kubectl apply -f manifests/base/crd.yaml`, or the CRD and the operator with " +
			"`kubectl apply -k manifests/overlays/standalone`, then start the operator again",
		MissingStatus: "the installed MPIJob CRD has no status subresource, so the operator cannot report job status. " +
			"Update it with `kubectl apply -f manifests/base/crd.yaml`, then start the operator again",
	})
}

// checkPodGroupCRD fails unless the API server serves volcano PodGroups,
// which gang scheduling creates.
func checkPodGroupCRD(d discovery.DiscoveryInterface, scheduler string) error {
	return operator.CheckServed(d, operator.Requirement{
		What:         "the volcano PodGroup CRD",
		GroupVersion: podGroupGroupVersion,
		Resource:     podGroupResource,
		Missing: fmt.Sprintf("--gang-scheduling=%s needs volcano. Install volcano (https://volcano.sh/en/docs/installation/), "+
			"or start the operator without --gang-scheduling", scheduler),
	})
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
		Clients:              engine.Clients{Events: cs.events, Creations: cs.creates, Jobs: cs.dynamic},
	}
	var vc volcanoclient.Interface // a nil interface, not a typed nil pointer
	if cs.volcano != nil {
		vc = cs.volcano
	}
	return operator.RunController(ctx, running, o.Threadiness, func(ctx context.Context) (operator.Informers, operator.Controller) {
		inf := controller.NewInformers(cs.kube, cs.meta, cs.mpi, vc, cfg)
		return inf, controller.NewMPIJobController(ctx, cs.kube, cs.mpi, vc, inf, cfg)
	})
}
