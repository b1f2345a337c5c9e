package controller

import (
	"maps"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	schedclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	schedinformers "sigs.k8s.io/scheduler-plugins/pkg/generated/informers/externalversions"
	volcanoclient "volcano.sh/apis/pkg/client/clientset/versioned"
	volcanoinformers "volcano.sh/apis/pkg/client/informers/externalversions"

	"github.com/kubeflow/mpi-operator/pkg/engine"
	"github.com/kubeflow/mpi-operator/pkg/podcache"
	"github.com/kubeflow/mpi-operator/pkg/tolerant"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
	clientset "github.com/kubeflow/mpi-operator/v2/pkg/client/clientset/versioned"
	mpischeme "github.com/kubeflow/mpi-operator/v2/pkg/client/clientset/versioned/scheme"
	mpiinformers "github.com/kubeflow/mpi-operator/v2/pkg/client/informers/externalversions"
)

// Config holds the operator-wide settings of the controller.
type Config struct {
	// Namespace limits the controller to one namespace; empty means all.
	Namespace string
	// ClusterDomain, when set, completes the host names in the job's files
	// (<pod>.<job>.<namespace>.svc.<ClusterDomain>).
	ClusterDomain string
	// GangSchedulerName turns on gang scheduling: "volcano" for volcano
	// PodGroups, any other name for scheduler-plugins PodGroups and pods
	// that ask for that scheduler; empty means off.
	GangSchedulerName string
	// RefreshLauncher annotates the launcher's pod after each change of
	// discover_hosts.sh, so that the kubelet refreshes its volume at once.
	RefreshLauncher bool
	// MaxWorkerPods bounds the workers a job has at once, listed or
	// draining (elastic.Spec.MaxPods); zero means v2beta1.MaxWorkers, the
	// most a job may ask for. Tests set a small one.
	MaxWorkerPods int
	// WriteBytesPerSecond is the pace of each job's writes of its files
	// and the objects beside them (engine.Pace); zero means
	// engine.DefaultBytesPerSecond. Tests set a slow one.
	WriteBytesPerSecond int
	// Clients are the clients with rate limits of their own.
	Clients engine.Clients
}

// gang is the gang scheduler that cfg asks for.
func (cfg Config) gang() gangScheduler {
	switch cfg.GangSchedulerName {
	case "":
		return gangScheduler{}
	case string(gangVolcano):
		return gangScheduler{kind: gangVolcano, schedulerName: cfg.GangSchedulerName}
	default:
		return gangScheduler{kind: gangSchedulerPlugins, schedulerName: cfg.GangSchedulerName}
	}
}

// Informers holds the informer factories the controller reads from. Pods
// and the children that are not pods are watched through label filters, so
// that the caches grow with the jobs' own objects only.
type Informers struct {
	jobs mpiinformers.SharedInformerFactory
	// pods are the pods the operator labels: workers and launchers.
	pods informers.SharedInformerFactory
	// otherPods are every other pod, names and owners only: a pod that is
	// not the job's may hold the name of one of its workers.
	otherPods metadatainformer.SharedInformerFactory
	// labelled are the Services, ConfigMaps, Secrets, launcher Jobs and
	// EndpointSlices labelled "app", as the job's children are.
	labelled     informers.SharedInformerFactory
	volcano      volcanoinformers.SharedInformerFactory // nil unless volcano gangs
	schedPlugins schedinformers.SharedInformerFactory   // nil unless scheduler-plugins gangs
	// skippedJobs are the MPIJobs that cannot be decoded; the controller
	// reports them.
	skippedJobs *tolerant.Skips
}

// NewInformers returns the factories for cfg. volcano and schedPlugins may
// be nil unless cfg's gang scheduler needs them. Nothing is resynced
// periodically: the controller acts on changes and retries its own
// failures.
func NewInformers(kube kubernetes.Interface, meta metadata.Interface, mpi clientset.Interface,
	volcano volcanoclient.Interface, schedPlugins schedclient.Interface, cfg Config) *Informers {
	selecting := func(selector string) informers.SharedInformerOption {
		return informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector })
	}
	inf := &Informers{
		jobs: mpiinformers.NewSharedInformerFactoryWithOptions(mpi, resyncNever,
			mpiinformers.WithNamespace(cfg.Namespace), mpiinformers.WithTransform(podcache.DropManagedFields)),
		pods: informers.NewSharedInformerFactoryWithOptions(kube, resyncNever, informers.WithNamespace(cfg.Namespace),
			selecting(labelOperatorName+"="+operatorName)),
		labelled: informers.NewSharedInformerFactoryWithOptions(kube, resyncNever, informers.WithNamespace(cfg.Namespace),
			selecting(labelApp), informers.WithTransform(trimChild)),
		// A selector "key!=value" also selects the objects without the key.
		otherPods: metadatainformer.NewFilteredSharedInformerFactory(meta, resyncNever, cfg.Namespace,
			func(o *metav1.ListOptions) { o.LabelSelector = labelOperatorName + "!=" + operatorName }),
	}
	inf.skippedJobs = tolerant.NewSkips()
	if cfg.Clients.Jobs != nil {
		inf.jobs.InformerFor(&v2beta1.MPIJob{},
			tolerant.InformerFunc[clientset.Interface](cfg.Clients.Jobs, jobResource(cfg.Namespace), inf.skippedJobs))
	}
	// Set before anything can start the informers, which refuse them after.
	podcache.SetTransforms(inf.pods.Core().V1().Pods().Informer(), newPodTrimmer, inf.otherPodsInformer().Informer())
	switch cfg.gang().kind {
	case gangVolcano:
		if volcano != nil {
			inf.volcano = volcanoinformers.NewSharedInformerFactoryWithOptions(volcano, resyncNever,
				volcanoinformers.WithNamespace(cfg.Namespace), volcanoinformers.WithTweakListOptions(
					func(o *metav1.ListOptions) { o.LabelSelector = labelApp }),
				volcanoinformers.WithTransform(podcache.DropManagedFields))
		}
	case gangSchedulerPlugins:
		if schedPlugins != nil {
			inf.schedPlugins = schedinformers.NewSharedInformerFactoryWithOptions(schedPlugins, resyncNever,
				schedinformers.WithNamespace(cfg.Namespace), schedinformers.WithTweakListOptions(
					func(o *metav1.ListOptions) { o.LabelSelector = labelApp }),
				schedinformers.WithTransform(podcache.DropManagedFields))
		}
	}
	return inf
}

// jobResource tells pkg/tolerant how to list and decode MPIJobs.
func jobResource(namespace string) tolerant.Resource {
	return tolerant.ResourceOf[v2beta1.MPIJob, v2beta1.MPIJobList](v2beta1.SchemeGroupVersion.WithResource("mpijobs"),
		v2beta1.Kind, namespace, mpischeme.Codecs.UniversalDeserializer())
}

// factory is what Start and Shutdown need of an informer factory.
type factory interface {
	Start(stop <-chan struct{})
	Shutdown()
}

// factories are the factories in use.
func (i *Informers) factories() []factory {
	out := []factory{i.jobs, i.pods, i.otherPods, i.labelled}
	if i.volcano != nil {
		out = append(out, i.volcano)
	}
	if i.schedPlugins != nil {
		out = append(out, i.schedPlugins)
	}
	return out
}

// Start starts every informer the controller asked for.
func (i *Informers) Start(stop <-chan struct{}) {
	for _, f := range i.factories() {
		f.Start(stop)
	}
}

// Shutdown waits for the informers' goroutines once their stop channel has
// closed.
func (i *Informers) Shutdown() {
	for _, f := range i.factories() {
		f.Shutdown()
	}
}

var podsResource = corev1.SchemeGroupVersion.WithResource("pods")

func (i *Informers) otherPodsInformer() informers.GenericInformer {
	return i.otherPods.ForResource(podsResource)
}

// resyncNever documents that the informers have no periodic resync.
const resyncNever time.Duration = 0

// newPodTrimmer is the transform of the pods the operator labels, for the
// informer whose store is store: the cache keeps what trimPod keeps, and
// the pods of a job share what they hold alike (podcache), its first
// worker's first.
func newPodTrimmer(store cache.Store) *podcache.Trimmer {
	return podcache.NewTrimmer(store, trimPod,
		func(p *podcache.Pod) string { return p.Labels[labelJobName] },
		func(job string) []string { return []string{job + "-worker-0"} })
}

// trimPod keeps of a pod its metadata without the field managers, its
// phase and reason, whether it is Ready (the launcher waits for Ready
// workers) and its subdomain (the files name a worker under it). The spec
// and the rest of the status are most of a pod, and with thousands of
// workers cached, most of the operator's memory. The replica-index label
// goes too: the controller reads a worker's index from its name, and
// without the label the labels of a job's workers are all alike, so the
// cache keeps one copy of them (podcache.Trimmer).
func trimPod(pod *corev1.Pod) *podcache.Pod {
	labels := pod.Labels
	if _, ok := labels[labelReplicaIndex]; ok {
		labels = maps.Clone(labels)
		delete(labels, labelReplicaIndex)
	}
	return (&podcache.Pod{ObjectMeta: podcache.Meta(&pod.ObjectMeta, labels, pod.Annotations)}).Status(pod)
}

// trimChild keeps of an "app"-labelled object what the controller reads.
// Every namespace's tenants may label their objects "app", and a ConfigMap
// may hold a MiB: so an object that no MPIJob controls keeps only what tells
// that it is in the way of a child (its name, identity, controller and
// labels); a Secret keeps no data, as the controller only checks that a
// job's SSH Secret exists and is the job's, and private keys have no
// business in its memory; an EndpointSlice keeps, of each endpoint, the pod
// it names and the host name it gives it. The field managers go from all.
func trimChild(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Secret:
		o.Data, o.StringData = nil, nil
	case *discoveryv1.EndpointSlice:
		return trimSlice(o), nil
	}
	if m, ok := obj.(metav1.Object); ok && !controlledByAJob(m) {
		trimForeign(obj)
	}
	return podcache.DropManagedFields(obj)
}

// controlledByAJob tells whether an MPIJob (of any version) controls m.
func controlledByAJob(m metav1.Object) bool {
	_, ok := jobOf(m)
	return ok
}

// trimForeign empties an object that no job controls down to its metadata,
// and of that drops the annotations.
func trimForeign(obj any) {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		o.Data, o.BinaryData = nil, nil
	case *corev1.Service:
		o.Spec, o.Status = corev1.ServiceSpec{}, corev1.ServiceStatus{}
	case *batchv1.Job:
		o.Spec, o.Status = batchv1.JobSpec{}, batchv1.JobStatus{}
	case *corev1.Secret:
	default:
		return
	}
	obj.(metav1.Object).SetAnnotations(nil)
}

// publishedNames is what the cache keeps of an EndpointSlice: its metadata
// as podcache.Meta keeps it (the labels name the job and the Service) and,
// of each endpoint that gives a pod a host name, that name and the pod's
// UID, all that resolvable reads. A slice of a hundred workers decodes to
// some 60 KiB; this keeps 3.
type publishedNames struct {
	metav1.ObjectMeta
	Pods []namedPod
}

// namedPod is a pod that an endpoint gives the host name Host.
type namedPod struct {
	UID  types.UID
	Host string
}

// trimSlice turns an EndpointSlice into what the cache keeps of it.
func trimSlice(s *discoveryv1.EndpointSlice) *publishedNames {
	named := 0
	for _, ep := range s.Endpoints {
		if namesPod(ep) {
			named++
		}
	}
	out := &publishedNames{ObjectMeta: podcache.Meta(&s.ObjectMeta, s.Labels, nil), Pods: make([]namedPod, 0, named)}
	for _, ep := range s.Endpoints {
		if namesPod(ep) {
			out.Pods = append(out.Pods, namedPod{UID: ep.TargetRef.UID, Host: *ep.Hostname})
		}
	}
	return out
}

// namesPod tells whether an endpoint gives a pod a host name.
func namesPod(ep discoveryv1.Endpoint) bool {
	return ep.Hostname != nil && ep.TargetRef != nil && ep.TargetRef.Kind == "Pod"
}

// asPublished reads a cached EndpointSlice: as the transform left it, or
// whole, as tests may put it in the cache; nil for anything else.
func asPublished(obj any) *publishedNames {
	switch o := obj.(type) {
	case *publishedNames:
		return o
	case *discoveryv1.EndpointSlice:
		return trimSlice(o)
	}
	return nil
}

// byServiceName indexes EndpointSlices by "<namespace>/<service>".
const byServiceName = "service-name"

func sliceServiceName(obj any) ([]string, error) {
	s := asPublished(obj)
	if s == nil {
		return nil, nil
	}
	if svc, ok := s.Labels[discoveryv1.LabelServiceName]; ok {
		return []string{s.Namespace + "/" + svc}, nil
	}
	return nil, nil
}
