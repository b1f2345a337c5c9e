package reconcile

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// ByControllerUID is the name of an index of objects by the UID of their
// controller (ControllerUID).
const ByControllerUID = "controller-uid"

// ControllerUID is the index function of ByControllerUID.
func ControllerUID(obj any) ([]string, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, nil
	}
	if ref := metav1.GetControllerOf(m); ref != nil {
		return []string{string(ref.UID)}, nil
	}
	return nil, nil
}

// Strays are the pods in indexer, a cache of the pods that lack the label
// the controller's own pod informer selects by, indexed ByControllerUID,
// that the owner of UID uid controls: its pods whose labels a user or a
// mutating policy took away. Its syncs cannot see them, and an elastic job
// never asks for their names again, so no failed create finds them either.
func Strays(indexer cache.Indexer, uid types.UID) []metav1.Object {
	objs, err := indexer.ByIndex(ByControllerUID, string(uid))
	if err != nil {
		return nil
	}
	out := make([]metav1.Object, 0, len(objs))
	for _, obj := range objs {
		if m, ok := obj.(metav1.Object); ok && m.GetDeletionTimestamp() == nil {
			out = append(out, m)
		}
	}
	return out
}

// Adopt gives pod, one of the owner's that lost some of its labels, those
// labels, so that the pod informer and the selectors see it again; the
// owner's syncs wait for the cache to show them.
func (w *PodWrites) Adopt(ctx context.Context, owner Owner, pod metav1.Object, labels map[string]string) error {
	key, uid := owner.Key(), pod.GetUID()
	w.Expectations.ExpectChange(key, uid, ShowsLabels(labels))
	if _, err := w.relabel(ctx, pod.GetNamespace(), pod.GetName(), pod.GetResourceVersion(), labels); err != nil {
		w.Expectations.ObserveGone(key, uid)
		return err
	}
	return nil
}

// HasLabels tells whether obj carries every one of labels.
func HasLabels(obj metav1.Object, labels map[string]string) bool {
	have := obj.GetLabels()
	for k, v := range labels {
		if cur, ok := have[k]; !ok || cur != v {
			return false
		}
	}
	return true
}

// ShowsLabels is the test of a change that sets labels.
func ShowsLabels(labels map[string]string) func(metav1.Object) bool {
	return func(obj metav1.Object) bool { return HasLabels(obj, labels) }
}
