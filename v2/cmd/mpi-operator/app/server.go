package app

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	schedclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	volcanoclient "volcano.sh/apis/pkg/client/clientset/versioned"

	"github.com/kubeflow/mpi-operator/pkg/engine"
	"github.com/kubeflow/mpi-operator/pkg/operator"
	"github.com/kubeflow/mpi-operator/pkg/version"
	clientset "github.com/kubeflow/mpi-operator/v2/pkg/client/clientset/versioned"
	"github.com/kubeflow/mpi-operator/v2/pkg/controller"
)

const (
	userAgent = "mpi-operator-v2"
	// leaseName is upstream's, so that an upgraded install's replicas
	// and this operator's never lead at once.
	leaseName = "mpi-operator"
	// volcanoScheduler is the --gang-scheduling value that means volcano;
	// any other name means the scheduler-plugins coscheduling plugin.
	volcanoScheduler = "volcano"

	// discoveryTimeout bounds the start-up CRD checks, so that an
	// unreachable API server fails the start instead of hanging it.
	discoveryTimeout = 30 * time.Second
)

// clients bundles the API clients of the operator.
type clients struct {
	operator.KubeClients
	mpi          clientset.Interface
	volcano      volcanoclient.Interface  // only with --gang-scheduling=volcano
	schedPlugins schedclientset.Interface // only with another scheduler
}

// Run starts the operator with validated options and blocks until ctx is
// cancelled, which is a graceful stop and returns nil, or until something
// fails, which returns the error.
func Run(ctx context.Context, opts *Options) error {
	klog.InfoS("Starting mpi-operator-v2", "version", version.String(),
		"namespace", opts.Namespace, "threadiness", opts.Threadiness,
		"gangScheduling", opts.GangSchedulerName, "clusterDomain", opts.ClusterDomain,
		"leaderElect", opts.LeaderElect, "qps", opts.QPS, "burst", opts.Burst)
	cfg, err := opts.RestConfig(userAgent)
	if err != nil {
		return err
	}
	cs, err := newClients(cfg, opts.GangSchedulerName)
	if err != nil {
		return err
	}
	if err := checkCRDs(cfg, opts.GangSchedulerName); err != nil {
		return err
	}
	return operator.Serve(ctx, opts.ServeOptions(leaseName, cs.Kube), func(ctx context.Context, running *operator.RunningController) error {
		return runController(ctx, cs, opts, running)
	})
}

// newClients creates the API clients; the gang scheduler's only when gang
// scheduling is on.
func newClients(cfg *rest.Config, gang string) (clients, error) {
	kc, err := operator.NewKubeClients(cfg)
	if err != nil {
		return clients{}, err
	}
	cs := clients{KubeClients: kc}
	if cs.mpi, err = clientset.NewForConfig(cfg); err != nil {
		return cs, fmt.Errorf("creating the MPIJob client: %w", err)
	}
	switch gang {
	case "":
	case volcanoScheduler:
		if cs.volcano, err = volcanoclient.NewForConfig(cfg); err != nil {
			return cs, fmt.Errorf("creating the volcano client: %w", err)
		}
	default:
		if cs.schedPlugins, err = schedclientset.NewForConfig(cfg); err != nil {
			return cs, fmt.Errorf("creating the scheduler-plugins client: %w", err)
		}
	}
	return cs, nil
}

// requirements are the resources the operator cannot run without.
func requirements(gang string) []operator.Requirement {
	reqs := []operator.Requirement{{
		What:         "the v2beta1 MPIJob CRD",
		GroupVersion: "kubeflow.org/v2beta1",
		Resource:     "mpijobs",
		Status:       true,
		Missing: "Install the CRD with `kubectl apply -f v2/manifests/base/crd.yaml`, or the CRD and the operator with " +
			"`kubectl apply -k v2/manifests/overlays/standalone`, then start the operator again",
		MissingStatus: "the installed MPIJob CRD serves v2beta1 without its status subresource, so the operator cannot report job status. " +
			"Update it with `kubectl apply -f v2/manifests/base/crd.yaml`, then start the operator again",
	}}
	switch gang {
	case "":
	case volcanoScheduler:
		reqs = append(reqs, operator.Requirement{
			What: "the volcano PodGroup CRD", GroupVersion: "scheduling.volcano.sh/v1beta1", Resource: "podgroups",
			Missing: "--gang-scheduling=volcano needs volcano. Install volcano (https://volcano.sh/en/docs/installation/), " +
				"or start the operator without --gang-scheduling",
		})
	default:
		reqs = append(reqs, operator.Requirement{
			What: "the scheduler-plugins PodGroup CRD", GroupVersion: "scheduling.x-k8s.io/v1alpha1", Resource: "podgroups",
			Missing: fmt.Sprintf("--gang-scheduling=%s needs the scheduler-plugins coscheduling plugin and its PodGroup CRD "+
				"(https://github.com/kubernetes-sigs/scheduler-plugins), or start the operator without --gang-scheduling", gang),
		})
	}
	return reqs
}

// checkCRDs fails unless the API server serves every requirement.
func checkCRDs(cfg *rest.Config, gang string) error {
	dcfg := rest.CopyConfig(cfg)
	dcfg.Timeout = discoveryTimeout
	d, err := discovery.NewDiscoveryClientForConfig(dcfg)
	if err != nil {
		return fmt.Errorf("creating the discovery client: %w", err)
	}
	return checkServed(d, gang)
}

func checkServed(d discovery.DiscoveryInterface, gang string) error {
	for _, r := range requirements(gang) {
		if err := operator.CheckServed(d, r); err != nil {
			return err
		}
	}
	return nil
}

// runController runs the v2beta1 controller until ctx is done.
func runController(ctx context.Context, cs clients, o *Options, running *operator.RunningController) error {
	cfg := controller.Config{
		Namespace:         o.Namespace,
		ClusterDomain:     o.ClusterDomain,
		GangSchedulerName: o.GangSchedulerName,
		RefreshLauncher:   o.RefreshLauncher,
		Clients:           engine.Clients{Events: cs.Events, Creations: cs.Creations, Jobs: cs.Dynamic},
	}
	// Nil interfaces, not typed nil pointers, for the schedulers not used.
	var vc volcanoclient.Interface
	if cs.volcano != nil {
		vc = cs.volcano
	}
	var sc schedclientset.Interface
	if cs.schedPlugins != nil {
		sc = cs.schedPlugins
	}
	return operator.RunController(ctx, running, o.Threadiness, func(ctx context.Context) (operator.Informers, operator.Controller) {
		inf := controller.NewInformers(cs.Kube, cs.Meta, cs.mpi, vc, sc, cfg)
		return inf, controller.NewMPIJobController(ctx, cs.Kube, cs.mpi, vc, sc, inf, cfg)
	})
}
