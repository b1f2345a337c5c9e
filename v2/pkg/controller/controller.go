package controller

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	schedclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	schedlisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"
	volcanoclient "volcano.sh/apis/pkg/client/clientset/versioned"
	volcanolisters "volcano.sh/apis/pkg/client/listers/scheduling/v1beta1"

	"github.com/kubeflow/mpi-operator/pkg/engine"
	"github.com/kubeflow/mpi-operator/pkg/podcache"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
	"github.com/kubeflow/mpi-operator/pkg/tolerant"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
	clientset "github.com/kubeflow/mpi-operator/v2/pkg/client/clientset/versioned"
	mpischeme "github.com/kubeflow/mpi-operator/v2/pkg/client/clientset/versioned/scheme"
	listers "github.com/kubeflow/mpi-operator/v2/pkg/client/listers/kubeflow/v2beta1"
)

const controllerName = "mpi-job-controller"

// MPIJobController reconciles v2beta1 MPIJobs into their Service, SSH
// Secret, ConfigMap, PodGroup, worker pods and launcher Job.
type MPIJobController struct {
	kube         kubernetes.Interface
	mpi          clientset.Interface
	volcano      volcanoclient.Interface
	schedPlugins schedclient.Interface
	cfg          Config
	gang         gangScheduler

	jobLister     listers.MPIJobLister
	podLister     corelisters.PodLister
	podIndexer    cache.Indexer // pods by reconcile.ByControllerUID
	serviceLister corelisters.ServiceLister
	configMaps    *reconcile.Written[*corev1.ConfigMap]
	secretLister  corelisters.SecretLister
	launchers     *reconcile.Written[*batchv1.Job]
	sliceIndexer  cache.Indexer // EndpointSlices by byServiceName
	// holders finds who holds a worker's name, and strays indexes the pods
	// the operator does not label by reconcile.ByControllerUID.
	holders           engine.Holders
	strays            cache.Indexer
	volcanoGroups     volcanolisters.PodGroupLister // nil unless volcano gangs
	schedPluginGroups schedlisters.PodGroupLister   // nil unless scheduler-plugins gangs

	// Base is the queue, the recorder, the engine and the rest of the
	// machinery that both operators' controllers share.
	*engine.Base

	// The handlers of the MPIJob informer, of the two pod informers and of
	// the informers of the other children.
	jobEvents, podEvents, otherPodEvents, ownedEvents cache.ResourceEventHandlerFuncs

	// memory lists the Base's stores: all that the controller remembers of
	// a job, forgotten at once when it is deleted.
	memory reconcile.JobMemory
}

// The event recorder resolves MPIJobs through client-go's scheme, which
// every client of the process reads: the types are added to it once, before
// any controller exists.
func init() {
	utilruntime.Must(mpischeme.AddToScheme(scheme.Scheme))
}

// NewMPIJobController wires a controller to the informers in inf. volcano
// and schedPlugins may be nil unless cfg's gang scheduler needs them. Events
// go to the API server through a broadcaster that stops with ctx.
func NewMPIJobController(ctx context.Context, kube kubernetes.Interface, mpi clientset.Interface,
	volcano volcanoclient.Interface, schedPlugins schedclient.Interface, inf *Informers, cfg Config) *MPIJobController {
	events := cfg.Clients.Events
	if events == nil {
		events = kube
	}
	recorder := engine.NewRecorder(ctx, events, controllerName)
	return newController(ctx, kube, mpi, volcano, schedPlugins, inf, cfg, recorder, clock.RealClock{})
}

func newController(ctx context.Context, kube kubernetes.Interface, mpi clientset.Interface,
	volcano volcanoclient.Interface, schedPlugins schedclient.Interface, inf *Informers, cfg Config,
	recorder record.EventRecorder, clk clock.Clock) *MPIJobController {
	logger := klog.FromContext(ctx)
	jobs := inf.jobs.Kubeflow().V2beta1().MPIJobs()
	inf.skippedJobs.SetReporter(tolerant.EventReporter(recorder, "mpijobs"))
	pods := inf.pods.Core().V1().Pods()
	services := inf.labelled.Core().V1().Services()
	cms := inf.labelled.Core().V1().ConfigMaps()
	secrets := inf.labelled.Core().V1().Secrets()
	launchers := inf.labelled.Batch().V1().Jobs()
	slices := inf.labelled.Discovery().V1().EndpointSlices()
	others := inf.otherPodsInformer()

	// Only a started informer refuses an indexer; these are not started.
	for _, inf := range []cache.SharedIndexInformer{pods.Informer(), others.Informer()} {
		utilruntime.Must(inf.AddIndexers(cache.Indexers{reconcile.ByControllerUID: reconcile.ControllerUID}))
	}
	utilruntime.Must(slices.Informer().AddIndexers(cache.Indexers{byServiceName: sliceServiceName}))
	c := &MPIJobController{
		kube:          kube,
		mpi:           mpi,
		volcano:       volcano,
		schedPlugins:  schedPlugins,
		cfg:           cfg,
		gang:          cfg.gang(),
		jobLister:     jobs.Lister(),
		podLister:     podcache.Lister{Indexer: pods.Informer().GetIndexer()},
		podIndexer:    pods.Informer().GetIndexer(),
		serviceLister: services.Lister(),
		configMaps:    reconcile.NewWritten[*corev1.ConfigMap](ctx, corev1.Resource("configmaps"), cms.Informer().GetStore()),
		secretLister:  secrets.Lister(),
		launchers:     reconcile.NewWritten[*batchv1.Job](ctx, batchv1.Resource("jobs"), launchers.Informer().GetStore()),
		sliceIndexer:  slices.Informer().GetIndexer(),
		holders:       engine.Holders{Others: others.Lister()},
		strays:        others.Informer().GetIndexer(),
	}
	c.holders.Pods = c.podLister
	c.Base = engine.NewBase(kube, cfg.Clients.Creations, c.podLister, recorder, clk)
	c.Engine.Pace.BytesPerSecond = cfg.WriteBytesPerSecond
	c.memory = c.Stores()
	c.podEvents = c.PodEvents(podJob, isWorker)
	c.otherPodEvents = c.OtherPodEvents(jobOfWorkerName, func(namespace, name string) bool {
		_, ok := c.jobKeyIfExists(namespace, name)
		return ok
	})

	c.jobEvents = c.JobEvents(func(oldObj, newObj any) bool { return engine.Resized(oldObj, newObj, specReplicas) })
	c.ownedEvents = c.OwnedEvents(jobOf)

	handlers := map[cache.SharedIndexInformer]cache.ResourceEventHandler{
		jobs.Informer(): c.jobEvents,
		pods.Informer(): c.podEvents,
		// A pod that holds a worker's name matters when it comes and when
		// it goes: the worker may be created then.
		others.Informer():    c.otherPodEvents,
		services.Informer():  c.ownedEvents,
		cms.Informer():       c.ownedEvents,
		secrets.Informer():   c.ownedEvents,
		launchers.Informer(): c.ownedEvents,
		// The slices listed at the start come with every job's first
		// sync, which needs no urgency.
		slices.Informer(): cache.ResourceEventHandlerDetailedFuncs{
			AddFunc:    func(obj any, initial bool) { c.handleSlice(obj, !initial) },
			UpdateFunc: func(_, obj any) { c.handleSlice(obj, true) },
			DeleteFunc: func(obj any) { c.handleSlice(obj, true) },
		},
	}
	if inf.volcano != nil {
		groups := inf.volcano.Scheduling().V1beta1().PodGroups()
		c.volcanoGroups = groups.Lister()
		handlers[groups.Informer()] = c.ownedEvents
	}
	if inf.schedPlugins != nil {
		groups := inf.schedPlugins.Scheduling().V1alpha1().PodGroups()
		c.schedPluginGroups = groups.Lister()
		handlers[groups.Informer()] = c.ownedEvents
	}
	for informer, h := range handlers {
		c.AddHandler(logger, informer, h)
	}
	// The writes laid over the caches go once the caches show them.
	c.AddHandler(logger, cms.Informer(), c.configMaps.Events())
	c.AddHandler(logger, launchers.Informer(), c.launchers.Events())
	return c
}

// Run waits for the caches, then runs threadiness workers until ctx is
// done, and returns once they have stopped.
func (c *MPIJobController) Run(ctx context.Context, threadiness int) error {
	return c.RunWorkers(ctx, threadiness, c.syncHandler)
}

// jobOf returns the key of the MPIJob that controls obj, if one does.
func jobOf(obj any) (string, bool) { return engine.ControllerKey(obj, v2beta1.GroupName, v2beta1.Kind) }

// podJob is the key of the job a labelled pod belongs to: a worker's
// controller, or the job its launcher Job's pods name in their job-name
// label.
func podJob(pod *corev1.Pod) (string, bool) {
	if key, ok := jobOf(pod); ok {
		return key, true
	}
	if name := pod.Labels[labelJobName]; name != "" && pod.Labels[labelJobRole] == roleLauncher {
		return pod.Namespace + "/" + name, true
	}
	return "", false
}

// handleSlice enqueues the job whose Service an EndpointSlice belongs to:
// the EndpointSlice controller copies the Service's labels, app=<job>
// among them, to its slices.
func (c *MPIJobController) handleSlice(obj any, urgent bool) {
	s := asPublished(reconcile.Untombstone(obj))
	if s == nil {
		return
	}
	if key, ok := c.jobKeyIfExists(s.Namespace, s.Labels[labelApp]); ok {
		// A name that starts or stops resolving changes what
		// discover_hosts.sh may list.
		c.EnqueueChange(key, urgent, false)
	}
}

// jobKeyIfExists is the key of namespace/name if such an MPIJob exists.
func (c *MPIJobController) jobKeyIfExists(namespace, name string) (string, bool) {
	if name == "" {
		return "", false
	}
	if _, err := c.jobLister.MPIJobs(namespace).Get(name); err != nil {
		return "", false
	}
	return namespace + "/" + name, true
}

func jobKey(job *v2beta1.MPIJob) string { return job.Namespace + "/" + job.Name }
