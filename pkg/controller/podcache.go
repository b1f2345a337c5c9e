package controller

import (
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// cachedPod is what the pod cache holds of a pod of an MPIJob: its trimmed
// metadata and the few status fields the controller reads. A corev1.Pod is
// over a kilobyte before any of its fields is set, most of it the spec that
// the controller never reads back; with ten thousand workers cached, the
// difference is most of the operator's heap. Readers get a *corev1.Pod
// built from it (see asPod), so no code outside the cache sees this type.
type cachedPod struct {
	metav1.ObjectMeta
	Phase  corev1.PodPhase
	Reason string
	// ContainerStatuses are kept for launchers only: how each container
	// ended, and its restarts.
	ContainerStatuses []corev1.ContainerStatus
}

// podTrimmer is the pod informer's transform: trimPod, and then the new
// cachedPod shares its namespace, owner and labels with a pod of the same
// job when they are equal, so that ten thousand workers of a hundred jobs
// hold a hundred copies of them, not ten thousand. Cached objects are never
// modified, so sharing them is safe. The zero value shares nothing; use
// newPodTrimmer.
type podTrimmer struct {
	store cache.Store
	// last is the pod trimmed last. At the start, when the store is still
	// empty, the pods of a job come one after the other, in name order.
	mu   sync.Mutex
	last *cachedPod
}

// newPodTrimmer returns a transform that looks for pods to share with in
// store, the informer's own.
func newPodTrimmer(store cache.Store) *podTrimmer { return &podTrimmer{store: store} }

func (t *podTrimmer) trim(obj any) (any, error) {
	out, err := trimPod(obj)
	if p, ok := out.(*cachedPod); ok && err == nil && t.store != nil {
		t.share(p)
	}
	return out, err
}

// share looks for a pod of the same job to share with: the pod's own
// version in store, the job's first worker, its launcher, or the pod
// trimmed last.
func (t *podTrimmer) share(p *cachedPod) {
	t.mu.Lock()
	last := t.last
	t.last = p
	t.mu.Unlock()
	job := p.Labels[labelMPIJobName]
	sameJob := func(other *cachedPod) bool {
		return other.Namespace == p.Namespace && other.Labels[labelMPIJobName] == job
	}
	for _, name := range []string{p.Name, job + workerInfix + "0", job + launcherSuffix} {
		obj, exists, err := t.store.GetByKey(p.Namespace + "/" + name)
		if err != nil || !exists {
			continue
		}
		if other, ok := obj.(*cachedPod); ok && sameJob(other) {
			p.shareWith(other)
			return
		}
	}
	if last != nil && sameJob(last) {
		p.shareWith(last)
	}
}

// shareWith takes other's copies of what both hold alike.
func (p *cachedPod) shareWith(other *cachedPod) {
	if p.Namespace == other.Namespace {
		p.Namespace = other.Namespace
	}
	if len(p.OwnerReferences) == 1 && len(other.OwnerReferences) == 1 &&
		sameOwner(p.OwnerReferences[0], other.OwnerReferences[0]) {
		p.OwnerReferences = other.OwnerReferences
	}
	if p.Labels != nil && maps.Equal(p.Labels, other.Labels) {
		p.Labels = other.Labels
	}
	if p.Annotations != nil && maps.Equal(p.Annotations, other.Annotations) {
		p.Annotations = other.Annotations
	}
}

func sameOwner(a, b metav1.OwnerReference) bool {
	samePtr := func(x, y *bool) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return a.APIVersion == b.APIVersion && a.Kind == b.Kind && a.Name == b.Name && a.UID == b.UID &&
		samePtr(a.Controller, b.Controller) && samePtr(a.BlockOwnerDeletion, b.BlockOwnerDeletion)
}

// asPod returns the pod that a cache object stands for: a *corev1.Pod as
// it is (tests put whole pods in the cache), a *cachedPod rebuilt into one,
// or nil for anything else. The pod shares the cached object's maps and
// slices: like every cached object, it must not be modified.
func asPod(obj any) *corev1.Pod {
	switch p := obj.(type) {
	case *corev1.Pod:
		return p
	case *cachedPod:
		pod := &corev1.Pod{}
		p.fill(pod)
		return pod
	}
	return nil
}

// fill sets, on a zero pod, what p keeps of the pod it stands for.
func (p *cachedPod) fill(pod *corev1.Pod) {
	pod.APIVersion, pod.Kind = "v1", "Pod"
	pod.ObjectMeta = p.ObjectMeta
	pod.Status.Phase = p.Phase
	pod.Status.Reason = p.Reason
	pod.Status.ContainerStatuses = p.ContainerStatuses
}

// asPodEvent is asPod for what an event handler receives, which may also
// be the tombstone of a pod whose deletion the informer missed.
func asPodEvent(obj any) any {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		if p := asPod(tombstone.Obj); p != nil {
			tombstone.Obj = p
		}
		return tombstone
	}
	if p := asPod(obj); p != nil {
		return p
	}
	return obj
}

// podEvents wraps the handlers of the pod informer so that they receive
// *corev1.Pod objects.
func podEvents(h cache.ResourceEventHandlerFuncs) cache.ResourceEventHandlerFuncs {
	out := cache.ResourceEventHandlerFuncs{}
	if h.AddFunc != nil {
		out.AddFunc = func(obj any) { h.AddFunc(asPodEvent(obj)) }
	}
	if h.UpdateFunc != nil {
		out.UpdateFunc = func(oldObj, newObj any) { h.UpdateFunc(asPodEvent(oldObj), asPodEvent(newObj)) }
	}
	if h.DeleteFunc != nil {
		out.DeleteFunc = func(obj any) { h.DeleteFunc(asPodEvent(obj)) }
	}
	return out
}

// podCache reads the pod informer's cache as a PodLister.
type podCache struct{ indexer cache.Indexer }

var _ corelisters.PodLister = podCache{}

// List returns the cached pods that selector matches, in every namespace.
func (c podCache) List(selector labels.Selector) ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	err := cache.ListAll(c.indexer, selector, func(obj any) {
		if p := asPod(obj); p != nil {
			out = append(out, p)
		}
	})
	return out, err
}

// Pods reads the cached pods of one namespace.
func (c podCache) Pods(namespace string) corelisters.PodNamespaceLister {
	return podNamespaceCache{indexer: c.indexer, namespace: namespace}
}

type podNamespaceCache struct {
	indexer   cache.Indexer
	namespace string
}

// List returns the cached pods of the namespace that selector matches.
func (c podNamespaceCache) List(selector labels.Selector) ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	err := cache.ListAllByNamespace(c.indexer, c.namespace, selector, func(obj any) {
		if p := asPod(obj); p != nil {
			out = append(out, p)
		}
	})
	return out, err
}

// Get returns the cached pod name of the namespace, or a NotFound error.
func (c podNamespaceCache) Get(name string) (*corev1.Pod, error) {
	obj, exists, err := c.indexer.GetByKey(c.namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	p := asPod(obj)
	if !exists || p == nil {
		return nil, apierrors.NewNotFound(corev1.Resource("pod"), name)
	}
	return p, nil
}
