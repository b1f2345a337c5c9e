package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corelisters "k8s.io/client-go/listers/core/v1"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	volcanoclient "volcano.sh/apis/pkg/client/clientset/versioned"
	volcanotyped "volcano.sh/apis/pkg/client/clientset/versioned/typed/scheduling/v1beta1"
	volcanolisters "volcano.sh/apis/pkg/client/listers/scheduling/v1beta1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	clientset "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned"
	mpischeme "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned/scheme"
	listers "github.com/kubeflow/mpi-operator/pkg/client/listers/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/engine"
	"github.com/kubeflow/mpi-operator/pkg/podcache"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
	"github.com/kubeflow/mpi-operator/pkg/tolerant"
)

const controllerName = "mpi-job-controller"

// MPIJobController reconciles MPIJobs into their launcher, workers,
// ConfigMap, RBAC objects and, with gang scheduling, a volcano PodGroup.
type MPIJobController struct {
	kubeClient kubernetes.Interface
	mpiClient  clientset.Interface
	cfg        Config

	jobLister  listers.MPIJobLister
	podLister  corelisters.PodLister
	podIndexer cache.Indexer // pods by reconcile.ByControllerUID, besides the lister's
	configMaps *reconcile.Written[*corev1.ConfigMap]
	saLister   corelisters.ServiceAccountLister
	roleLister rbaclisters.RoleLister
	rbLister   rbaclisters.RoleBindingLister
	// holders finds who holds a worker's name, and strays indexes the pods
	// that no MPIJob labels by reconcile.ByControllerUID.
	holders  engine.Holders
	strays   cache.Indexer
	pgLister volcanolisters.PodGroupLister // nil without gang scheduling
	// podGroups writes PodGroups; a field so that tests can stand in for
	// volcano's client.
	podGroups func(namespace string) volcanotyped.PodGroupInterface

	// Base is the queue, the recorder, the engine and the rest of the
	// machinery both operators run on.
	*engine.Base

	// jobEvents, podEvents and otherPodEvents are the handlers of the
	// MPIJob informer and of the two pod informers.
	jobEvents, podEvents, otherPodEvents cache.ResourceEventHandlerFuncs
	// memory lists the Base's stores: all that the controller remembers
	// of a job, forgotten at once when it is deleted.
	memory reconcile.JobMemory
}

// The event recorder resolves MPIJobs through client-go's scheme, which
// every client of the process reads: the types are added to it once, before
// any controller exists.
func init() {
	utilruntime.Must(mpischeme.AddToScheme(scheme.Scheme))
}

// NewMPIJobController wires a controller to the informers in inf. Events go
// to the API server through a broadcaster that stops with ctx.
func NewMPIJobController(ctx context.Context, kubeClient kubernetes.Interface, mpiClient clientset.Interface,
	volcanoClient volcanoclient.Interface, inf *Informers, cfg Config) *MPIJobController {
	events := cfg.Clients.Events
	if events == nil {
		events = kubeClient
	}
	recorder := engine.NewRecorder(ctx, events, controllerName)
	return newController(ctx, kubeClient, mpiClient, volcanoClient, inf, cfg, recorder, clock.RealClock{})
}

func newController(ctx context.Context, kubeClient kubernetes.Interface, mpiClient clientset.Interface,
	volcanoClient volcanoclient.Interface, inf *Informers, cfg Config,
	recorder record.EventRecorder, clk clock.Clock) *MPIJobController {
	logger := klog.FromContext(ctx)
	jobs := inf.jobs.Kubeflow().V1().MPIJobs()
	pods := inf.pods.Core().V1().Pods()
	cms := inf.labelled.Core().V1().ConfigMaps()
	sas := inf.labelled.Core().V1().ServiceAccounts()
	roles := inf.rbac.Rbac().V1().Roles()
	rbs := inf.rbac.Rbac().V1().RoleBindings()
	others := inf.otherPodsInformer()

	inf.skippedJobs.SetReporter(tolerant.EventReporter(recorder, "mpijobs"))
	for _, inf := range []cache.SharedIndexInformer{pods.Informer(), others.Informer()} {
		if err := inf.AddIndexers(cache.Indexers{reconcile.ByControllerUID: reconcile.ControllerUID}); err != nil {
			// Only a started informer refuses an indexer; it cannot be yet.
			logger.Error(err, "Adding the pod index")
		}
	}
	c := &MPIJobController{
		kubeClient: kubeClient,
		mpiClient:  mpiClient,
		cfg:        cfg,
		jobLister:  jobs.Lister(),
		podLister:  podcache.Lister{Indexer: pods.Informer().GetIndexer()},
		podIndexer: pods.Informer().GetIndexer(),
		configMaps: reconcile.NewWritten[*corev1.ConfigMap](ctx, corev1.Resource("configmaps"), cms.Informer().GetStore()),
		saLister:   sas.Lister(),
		roleLister: roles.Lister(),
		rbLister:   rbs.Lister(),
		holders:    engine.Holders{Others: others.Lister()},
		strays:     others.Informer().GetIndexer(),
	}
	c.holders.Pods = c.podLister
	c.Base = engine.NewBase(kubeClient, cfg.Clients.Creations, c.podLister, recorder, clk)
	c.Engine.Pace.BytesPerSecond = cfg.WriteBytesPerSecond
	c.memory = c.Stores()
	c.otherPodEvents = c.OtherPodEvents(jobNameOfPod, func(namespace, name string) bool {
		_, err := c.jobLister.MPIJobs(namespace).Get(name)
		return err == nil
	})
	c.podEvents = c.PodEvents(func(pod *corev1.Pod) (string, bool) { return ownerKey(pod) }, isWorkerPod)
	c.jobEvents = c.JobEvents(func(oldObj, newObj any) bool { return engine.Resized(oldObj, newObj, desiredWorkers) })

	c.addHandler(logger, jobs.Informer(), c.jobEvents)
	c.addHandler(logger, pods.Informer(), c.podEvents)
	// A pod that holds a worker's name matters when it comes, as its name
	// must leave the Role, and when it goes, as the worker may be created.
	c.addHandler(logger, others.Informer(), c.otherPodEvents)
	owned := c.OwnedEvents(ownerKey)
	for _, informer := range []cache.SharedIndexInformer{cms.Informer(), sas.Informer(), roles.Informer(), rbs.Informer()} {
		c.addHandler(logger, informer, owned)
	}
	// The writes laid over the cache go once it shows them.
	c.addHandler(logger, cms.Informer(), c.configMaps.Events())
	if inf.volcano != nil {
		pgs := inf.volcano.Scheduling().V1beta1().PodGroups()
		c.pgLister = pgs.Lister()
		c.podGroups = volcanoClient.SchedulingV1beta1().PodGroups
		c.addHandler(logger, pgs.Informer(), owned)
	}
	return c
}

func (c *MPIJobController) addHandler(logger klog.Logger, informer cache.SharedIndexInformer, h cache.ResourceEventHandler) {
	c.AddHandler(logger, informer, h)
}

// Run waits for the caches, then syncs the queue's jobs with threadiness
// workers, and engine.UrgentWorkers more for urgent keys, until ctx is done.
func (c *MPIJobController) Run(ctx context.Context, threadiness int) error {
	return c.RunWorkers(ctx, threadiness, c.syncHandler)
}

// ownerKey is the queue key of the MPIJob that controls obj.
func ownerKey(obj any) (string, bool) {
	return engine.ControllerKey(obj, kubeflow.GroupName, kubeflow.Kind)
}

// isWorkerPod tells whether a pod of a job is one of its workers.
func isWorkerPod(pod *corev1.Pod) bool { return pod.Labels[labelMPIRole] == roleWorker }
