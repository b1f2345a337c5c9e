package controller

import (
	"time"

	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	volcanoclient "volcano.sh/apis/pkg/client/clientset/versioned"
	volcanoinformers "volcano.sh/apis/pkg/client/informers/externalversions"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	clientset "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned"
	mpischeme "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned/scheme"
	mpiinformers "github.com/kubeflow/mpi-operator/pkg/client/informers/externalversions"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/engine"
	"github.com/kubeflow/mpi-operator/pkg/podcache"
	"github.com/kubeflow/mpi-operator/pkg/tolerant"
)

// Config holds the operator-wide settings of the controller.
type Config struct {
	// Namespace limits the controller to one namespace; empty means all.
	Namespace string
	// KubectlDeliveryImage is the image of the launcher's init container.
	KubectlDeliveryImage string
	// GangSchedulerName turns on gang scheduling with volcano PodGroups;
	// empty means off.
	GangSchedulerName string
	// RefreshLauncher annotates the launcher after each change of
	// discover_hosts.sh, so that the kubelet refreshes its volume at once.
	RefreshLauncher bool
	// MaxWorkerPods bounds the workers a job has at once, listed or
	// draining (elastic.Spec.MaxPods); zero means kubeflow.MaxWorkers, the
	// most a job may ask for. Tests set a small one.
	MaxWorkerPods int
	// WriteBytesPerSecond is the pace of each job's writes of its files
	// and the objects beside them (engine.Pace); zero means
	// engine.DefaultBytesPerSecond. Tests set a slow one.
	WriteBytesPerSecond int
	// Clients are the clients with rate limits of their own.
	Clients engine.Clients
}

// Informers holds the informer factories the controller reads from. Pods and
// the ConfigMaps and ServiceAccounts of jobs are watched through label
// filters, and every cached object is trimmed to what the controller reads,
// so that memory grows with the jobs' own objects only.
type Informers struct {
	jobs mpiinformers.SharedInformerFactory
	pods informers.SharedInformerFactory // pods of MPIJobs
	// otherPods are every other pod, names and owners only: a pod that is
	// not the job's may hold the name of one of its workers.
	otherPods metadatainformer.SharedInformerFactory
	labelled  informers.SharedInformerFactory // ConfigMaps and ServiceAccounts of MPIJobs
	rbac      informers.SharedInformerFactory
	volcano   volcanoinformers.SharedInformerFactory // nil without gang scheduling
	// skippedJobs are the MPIJobs that cannot be decoded; the controller
	// reports them.
	skippedJobs *tolerant.Skips
}

// NewInformers returns the factories for cfg. volcanoClient may be nil when
// gang scheduling is off. Nothing is resynced periodically: the controller
// acts on changes, and retries its own failures.
func NewInformers(kubeClient kubernetes.Interface, metaClient metadata.Interface, mpiClient clientset.Interface, volcanoClient volcanoclient.Interface, cfg Config) *Informers {
	ns := informers.WithNamespace(cfg.Namespace)
	withLabel := func(key string) informers.SharedInformerOption {
		return informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = key })
	}
	inf := &Informers{
		jobs: mpiinformers.NewSharedInformerFactoryWithOptions(mpiClient, resyncNever,
			mpiinformers.WithNamespace(cfg.Namespace), mpiinformers.WithTransform(trimJob)),
		pods: informers.NewSharedInformerFactoryWithOptions(kubeClient, resyncNever, ns,
			withLabel(labelMPIJobName)),
		labelled: informers.NewSharedInformerFactoryWithOptions(kubeClient, resyncNever, ns,
			withLabel(labelApp), informers.WithTransform(trimLabelled)),
		rbac: informers.NewSharedInformerFactoryWithOptions(kubeClient, resyncNever, ns,
			informers.WithTransform(trimRBAC)),
		otherPods: metadatainformer.NewFilteredSharedInformerFactory(metaClient, resyncNever, cfg.Namespace,
			func(o *metav1.ListOptions) { o.LabelSelector = "!" + labelMPIJobName }),
	}
	inf.skippedJobs = tolerant.NewSkips()
	if cfg.Clients.Jobs != nil {
		inf.jobs.InformerFor(&kubeflow.MPIJob{},
			tolerant.InformerFunc[clientset.Interface](cfg.Clients.Jobs, jobResource(cfg.Namespace), inf.skippedJobs))
	}
	// Set before anything can start the informers, which refuse them after.
	podcache.SetTransforms(inf.pods.Core().V1().Pods().Informer(), newPodTrimmer, inf.otherPodsInformer().Informer())
	if volcanoClient != nil && cfg.GangSchedulerName != "" {
		inf.volcano = volcanoinformers.NewSharedInformerFactoryWithOptions(volcanoClient, resyncNever,
			volcanoinformers.WithNamespace(cfg.Namespace),
			volcanoinformers.WithTransform(podcache.DropManagedFields))
	}
	return inf
}

// jobResource tells pkg/tolerant how to list and decode MPIJobs.
func jobResource(namespace string) tolerant.Resource {
	return tolerant.ResourceOf[kubeflow.MPIJob, kubeflow.MPIJobList](kubeflow.SchemeGroupVersion.WithResource("mpijobs"),
		kubeflow.Kind, namespace, mpischeme.Codecs.UniversalDeserializer())
}

// Start starts every informer the controller asked for.
func (i *Informers) Start(stopCh <-chan struct{}) {
	i.jobs.Start(stopCh)
	i.pods.Start(stopCh)
	i.labelled.Start(stopCh)
	i.rbac.Start(stopCh)
	i.otherPods.Start(stopCh)
	if i.volcano != nil {
		i.volcano.Start(stopCh)
	}
}

// Shutdown waits for the informers' goroutines after their stop channel
// closed.
func (i *Informers) Shutdown() {
	i.jobs.Shutdown()
	i.pods.Shutdown()
	i.labelled.Shutdown()
	i.rbac.Shutdown()
	i.otherPods.Shutdown()
	if i.volcano != nil {
		i.volcano.Shutdown()
	}
}

// trimRBAC keeps a Role or RoleBinding that an MPIJob controls whole but
// for its managed fields: the controller updates it from the cached copy.
// Of any other it keeps the metadata that says whose it is: the controller
// only needs to know that the name is taken. The informer is not filtered
// by label, as Roles and RoleBindings that upstream's operator created carry
// none, and a cluster upgraded in place must still find and update them.
func trimRBAC(obj any) (any, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return obj, nil
	}
	m.SetManagedFields(nil)
	if controlledByMPIJob(m) {
		return obj, nil
	}
	switch o := obj.(type) {
	case *rbacv1.Role:
		return &rbacv1.Role{ObjectMeta: podcache.Meta(&o.ObjectMeta, nil, nil)}, nil
	case *rbacv1.RoleBinding:
		return &rbacv1.RoleBinding{ObjectMeta: podcache.Meta(&o.ObjectMeta, nil, nil)}, nil
	}
	return obj, nil
}

// Pod labels and annotations the controller reads; trimPod drops the rest.
var (
	keptPodLabels = []string{labelGroupName, labelMPIJobName, labelMPIRole,
		labelReplicaIndex, common.ReplicaIndexLabel}
	keptPodAnnotations = []string{elastic.AnnotationDrainingSince, elastic.AnnotationReplacedBy,
		elastic.AnnotationHostsHash, elastic.AnnotationDeletionCost}
)

// newPodTrimmer is the pod informer's transform, for the informer whose
// store is store: trimPod, and the pods of a job share what they hold
// alike, the job's first worker and launcher first.
func newPodTrimmer(store cache.Store) *podcache.Trimmer {
	return podcache.NewTrimmer(store, trimPod,
		func(p *podcache.Pod) string { return p.Labels[labelMPIJobName] },
		func(job string) []string { return []string{job + workerInfix + "0", job + launcherSuffix} })
}

// trimPod turns a pod into what the cache keeps: its name, identity, owner,
// deletion, the labels and annotations the controller selects or marks pods
// with, the phase and reason, and, for a launcher, how its containers
// ended. With thousands of workers cached, every dropped field counts.
func trimPod(pod *corev1.Pod) *podcache.Pod {
	labels := keep(pod.Labels, keptPodLabels)
	if labels[labelMPIRole] == roleWorker {
		// The index labels repeat the name's suffix, as the controller
		// names its workers: without them, the labels of a job's workers
		// are all the same, and the cache keeps one copy (podTrimmer).
		jobName := labels[labelMPIJobName]
		i, ok := workerIndexOf(jobName, pod.Name, labels)
		fromName, okName := workerIndexOf(jobName, pod.Name, nil)
		if i == fromName && ok == okName {
			delete(labels, labelReplicaIndex)
			delete(labels, common.ReplicaIndexLabel)
		}
	}
	out := &podcache.Pod{
		ObjectMeta: podcache.Meta(&pod.ObjectMeta, labels, keep(pod.Annotations, keptPodAnnotations)),
		Phase:      pod.Status.Phase,
		Reason:     pod.Status.Reason,
	}
	if pod.Labels[labelMPIRole] == roleLauncher {
		for _, s := range pod.Status.ContainerStatuses {
			trimmed := corev1.ContainerStatus{Name: s.Name, RestartCount: s.RestartCount}
			if t := s.State.Terminated; t != nil {
				trimmed.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Reason: t.Reason}
			}
			out.ContainerStatuses = append(out.ContainerStatuses, trimmed)
		}
	}
	return out
}

var podsResource = corev1.SchemeGroupVersion.WithResource("pods")

func (i *Informers) otherPodsInformer() informers.GenericInformer {
	return i.otherPods.ForResource(podsResource)
}

// keep returns the entries of m under keys, or nil when there are none.
func keep(m map[string]string, keys []string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = make(map[string]string, len(keys))
			}
			out[k] = v
		}
	}
	return out
}

// trimLabelled trims what the informer of objects labelled "app" caches.
// Its label filter lets through any ConfigMap or ServiceAccount so
// labelled, a tenant's as well as a job's, and a tenant's may be large.
// A ConfigMap that an MPIJob controls is kept whole but for its managed
// fields: the controller reads its files and annotations, and updates it
// from the cached copy. Of a ServiceAccount the controller reads only whose
// it is (serviceAccountChild never updates one), and of any other object
// only that its name is taken and by whom: both are kept as metadata, with
// their labels.
func trimLabelled(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		if controlledByMPIJob(o) {
			o.ManagedFields = nil
			return o, nil
		}
		return &corev1.ConfigMap{ObjectMeta: podcache.Meta(&o.ObjectMeta, o.Labels, nil)}, nil
	case *corev1.ServiceAccount:
		return &corev1.ServiceAccount{ObjectMeta: podcache.Meta(&o.ObjectMeta, o.Labels, nil)}, nil
	}
	return podcache.DropManagedFields(obj)
}

// controlledByMPIJob tells whether m's controller is an MPIJob of group
// kubeflow.org: an MPIJob of another group is not this operator's.
func controlledByMPIJob(m metav1.Object) bool {
	_, ok := ownerKey(m)
	return ok
}

// resyncNever documents that the informers have no periodic resync.
const resyncNever time.Duration = 0
