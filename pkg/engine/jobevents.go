package engine

import (
	"strings"

	"github.com/kubeflow/mpi-operator/pkg/reconcile"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// JobEvents are the handlers of an MPIJob informer: every event enqueues
// its job, and an update urgently when resized tells that it changed the
// worker replicas (Resized), as the victims of a scale-in leave the files
// at once.
func (b *Base) JobEvents(resized func(oldObj, newObj any) bool) cache.ResourceEventHandlerFuncs {
	enqueue := func(obj any) {
		if m, ok := reconcile.Untombstone(obj).(metav1.Object); ok {
			b.Queue.Add(m.GetNamespace() + "/" + m.GetName())
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(oldObj, newObj any) {
			if m, ok := newObj.(metav1.Object); ok {
				b.EnqueueChange(m.GetNamespace()+"/"+m.GetName(), resized(oldObj, newObj), false)
			}
		},
		DeleteFunc: enqueue,
	}
}

// OwnedEvents are the handlers of the informers of a job's children that
// are not pods: every event enqueues the job jobOf names (false: none).
func (b *Base) OwnedEvents(jobOf func(obj any) (string, bool)) cache.ResourceEventHandlerFuncs {
	enqueue := func(obj any) {
		if key, ok := jobOf(obj); ok {
			b.Queue.Add(key)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}
}

// ControllerKey is the queue key of the job that controls obj (or the
// object of a tombstone): its controller reference when that names kind in
// group, of any version.
func ControllerKey(obj any, group, kind string) (string, bool) {
	m, ok := reconcile.Untombstone(obj).(metav1.Object)
	if !ok {
		return "", false
	}
	ref := metav1.GetControllerOfNoCopy(m)
	if ref == nil || !Names(ref, group, kind) {
		return "", false
	}
	return m.GetNamespace() + "/" + ref.Name, true
}

// Names tells whether an owner reference names kind in group, of any
// version.
func Names(ref *metav1.OwnerReference, group, kind string) bool {
	g, v, ok := strings.Cut(ref.APIVersion, "/")
	return ok && ref.Kind == kind && g == group && v != "" && !strings.Contains(v, "/")
}
