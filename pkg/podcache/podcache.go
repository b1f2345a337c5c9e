// Package podcache keeps, in a pod informer's cache, only what the
// controllers of both operators read of their pods, and gives it back to
// them as *corev1.Pod.
//
// A corev1.Pod is over a kilobyte before any of its fields is set, most of
// it the spec that a controller never reads back; with ten thousand workers
// cached, the difference is most of an operator's heap. The informer's
// transform (Trimmer) turns each pod into a Pod, which shares its
// namespace, owner, labels and annotations with a pod of the same job when
// they are equal, so that ten thousand workers of a hundred jobs hold a
// hundred copies of them, not ten thousand. Readers get pods rebuilt from
// it (Lister, Select, Events), so no code outside this package sees Pod.
package podcache

import (
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// Pod is what the cache holds of a pod.
type Pod struct {
	metav1.ObjectMeta
	Phase  corev1.PodPhase
	Reason string
	// Subdomain is the pod's spec.subdomain.
	Subdomain string
	// Ready is the status of the pod's Ready condition; "" when it has
	// none.
	Ready corev1.ConditionStatus
	// ContainerStatuses are what the caller's trim keeps of them, if
	// anything.
	ContainerStatuses []corev1.ContainerStatus
}

// Meta is what the cache keeps of an object's metadata: its identity, its
// times, its controller, and the labels and annotations given.
func Meta(m *metav1.ObjectMeta, labels, annotations map[string]string) metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		Name:              m.Name,
		Namespace:         m.Namespace,
		UID:               m.UID,
		ResourceVersion:   m.ResourceVersion,
		CreationTimestamp: m.CreationTimestamp,
		DeletionTimestamp: m.DeletionTimestamp,
		Labels:            labels,
		Annotations:       annotations,
	}
	if ref := metav1.GetControllerOf(m); ref != nil {
		out.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	return out
}

// Status fills in p what the cache keeps of pod's status beside the
// container statuses: the phase, its reason, the Ready condition, and the
// subdomain of the spec.
func (p *Pod) Status(pod *corev1.Pod) *Pod {
	p.Phase, p.Reason, p.Subdomain = pod.Status.Phase, pod.Status.Reason, pod.Spec.Subdomain
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			p.Ready = c.Status
		}
	}
	return p
}

// fill sets, on a zero pod, what p keeps of the pod it stands for. The pod
// shares p's maps and slices: like every cached object, it must not be
// modified.
func (p *Pod) fill(pod *corev1.Pod) {
	pod.APIVersion, pod.Kind = "v1", "Pod"
	pod.ObjectMeta = p.ObjectMeta
	pod.Spec.Subdomain = p.Subdomain
	pod.Status.Phase = p.Phase
	pod.Status.Reason = p.Reason
	pod.Status.ContainerStatuses = p.ContainerStatuses
	if p.Ready != "" {
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: p.Ready}}
	}
}

// Trimmer is a pod informer's transform: trim, and then the new Pod shares
// what it holds alike with a pod of the same job.
type Trimmer struct {
	store cache.Store
	trim  func(*corev1.Pod) *Pod
	// jobOf names the job of a trimmed pod, "" for none; peers are the
	// names of pods of a job to share with first.
	jobOf func(*Pod) string
	peers func(job string) []string
	// last is the pod trimmed last. At the start, when the store is still
	// empty, the pods of a job come one after the other, in name order.
	mu   sync.Mutex
	last *Pod
}

// SetTransforms sets, before they start, the transforms of an operator's
// two pod informers: pods, of the pods it labels, through the Trimmer that
// newTrimmer makes for its store; others, of the metadata of the rest,
// through TrimMetadata. Only a started informer refuses a transform.
func SetTransforms(pods cache.SharedIndexInformer, newTrimmer func(cache.Store) *Trimmer, others cache.SharedIndexInformer) {
	_ = pods.SetTransform(newTrimmer(pods.GetIndexer()).Transform)
	_ = others.SetTransform(TrimMetadata)
}

// TrimMetadata keeps, of the metadata of a pod the operator does not
// label, what tells whether it holds a worker's name (Meta without labels
// and annotations).
func TrimMetadata(obj any) (any, error) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		m.ObjectMeta = Meta(&m.ObjectMeta, nil, nil)
	}
	return obj, nil
}

// DropManagedFields is the transform of a cache whose objects the
// controller reads whole but for their field managers, which no sync reads
// and which are often the larger part of an object.
func DropManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.ObjectMetaAccessor); ok {
		m.GetObjectMeta().SetManagedFields(nil)
	}
	return obj, nil
}

// NewTrimmer returns a transform for the informer whose store is store
// (where it looks for pods to share with; nil for none): trim turns a pod into what the
// cache keeps, jobOf names the job of a trimmed pod, and peers names the
// pods of a job that are most likely to exist, such as its first worker.
func NewTrimmer(store cache.Store, trim func(*corev1.Pod) *Pod, jobOf func(*Pod) string, peers func(job string) []string) *Trimmer {
	return &Trimmer{store: store, trim: trim, jobOf: jobOf, peers: peers}
}

// Transform is the informer's transform. Anything but a pod goes through
// as it is.
func (t *Trimmer) Transform(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	p := t.trim(pod)
	t.share(p)
	return p, nil
}

// share looks for a pod of the same job to share with: the pod's own
// version in store, the job's peers, or the pod trimmed last.
func (t *Trimmer) share(p *Pod) {
	t.mu.Lock()
	last := t.last
	t.last = p
	t.mu.Unlock()
	job := t.jobOf(p)
	if job == "" {
		return
	}
	sameJob := func(other *Pod) bool { return other.Namespace == p.Namespace && t.jobOf(other) == job }
	for _, name := range append([]string{p.Name}, t.peers(job)...) {
		if t.store == nil {
			break
		}
		obj, exists, err := t.store.GetByKey(p.Namespace + "/" + name)
		if err != nil || !exists {
			continue
		}
		if other, ok := obj.(*Pod); ok && sameJob(other) {
			p.shareWith(other)
			return
		}
	}
	if last != nil && sameJob(last) {
		p.shareWith(last)
	}
}

// shareWith takes other's copies of what both hold alike.
func (p *Pod) shareWith(other *Pod) {
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
