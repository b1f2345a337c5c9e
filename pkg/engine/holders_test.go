package engine

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
)

func TestHoldersOf(t *testing.T) {
	owner := &metav1.ObjectMeta{Name: "job", Namespace: "ns", UID: "job-uid"}
	controlledBy := func(uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{Kind: "MPIJob", Name: "job", UID: types.UID(uid), Controller: ptr.To(true)}}
	}
	deleting := &metav1.Time{}
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	others := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "job-worker-0", Namespace: "ns", OwnerReferences: controlledBy("job-uid")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "job-worker-1", Namespace: "ns"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "job-worker-2", Namespace: "ns", DeletionTimestamp: deleting}},
		{ObjectMeta: metav1.ObjectMeta{Name: "job-worker-5", Namespace: "other"}},
	} {
		if err := pods.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []*metav1.PartialObjectMetadata{
		{ObjectMeta: metav1.ObjectMeta{Name: "job-worker-3", Namespace: "ns"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "job-worker-4", Namespace: "ns", DeletionTimestamp: deleting}},
	} {
		if err := others.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	h := Holders{Pods: corelisters.NewPodLister(pods), Others: cache.NewGenericLister(others, schema.GroupResource{Resource: "pods"})}
	holderOf := h.Of(owner, func(i int) string { return "job-worker-" + string(rune('0'+i)) })
	for i, want := range []elastic.Holder{
		0: elastic.NameFree,    // the job's own worker
		1: elastic.NameHeld,    // someone else's pod the operator labels
		2: elastic.NameLeaving, // ... being deleted
		3: elastic.NameHeld,    // a pod the operator does not label
		4: elastic.NameLeaving, // ... being deleted
		5: elastic.NameFree,    // a pod of that name in another namespace
		6: elastic.NameFree,    // no pod
	} {
		if got := holderOf(i); got != want {
			t.Errorf("worker %d: holder %v, want %v", i, got, want)
		}
	}
}
