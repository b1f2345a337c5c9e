package podcache

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

var owner = metav1.OwnerReference{APIVersion: "kubeflow.org/v2beta1", Kind: "MPIJob", Name: "pi", UID: "pi-uid",
	Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}

// pod is a whole pod of job pi's, of the given name and role, with a spec
// and a status that the cache drops.
func pod(ns, name, role string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), ResourceVersion: "3",
			Labels:          map[string]string{"job": "pi", "role": role},
			Annotations:     map[string]string{"draining": "t"},
			OwnerReferences: []metav1.OwnerReference{owner, {Kind: "Other", Name: "not-the-controller"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
		Spec: corev1.PodSpec{Subdomain: "pi", Hostname: name, Containers: []corev1.Container{{Name: "c", Image: "i"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Reason: "r", PodIP: "10.0.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

// trim keeps the whole labels and annotations, and the status.
func trim(p *corev1.Pod) *Pod {
	return (&Pod{ObjectMeta: Meta(&p.ObjectMeta, p.Labels, p.Annotations)}).Status(p)
}

func newTrimmer(store cache.Store) *Trimmer {
	return NewTrimmer(store, trim, func(p *Pod) string { return p.Labels["job"] },
		func(job string) []string { return []string{job + "-worker-0"} })
}

func TestTransformKeepsWhatIsRead(t *testing.T) {
	in := pod("ns", "pi-worker-1", "worker")
	got, err := newTrimmer(cache.NewStore(cache.MetaNamespaceKeyFunc)).Transform(in.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: in.Name, Namespace: "ns", UID: in.UID, ResourceVersion: "3",
			Labels: in.Labels, Annotations: in.Annotations, OwnerReferences: []metav1.OwnerReference{owner}},
		Spec: corev1.PodSpec{Subdomain: "pi"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Reason: "r",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	if diff := cmp.Diff(want, AsPod(got)); diff != "" {
		t.Errorf("pod read from the cache (-want +got):\n%s", diff)
	}
	other := &corev1.ConfigMap{}
	if out, err := newTrimmer(nil).Transform(other); out != other || err != nil {
		t.Errorf("a ConfigMap came out as %#v, %v", out, err)
	}
}

func TestLister(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	tr := newTrimmer(indexer)
	var want []*corev1.Pod
	for _, name := range []string{"pi-worker-0", "pi-worker-1"} {
		cached, err := tr.Transform(pod("ns", name, "worker"))
		if err != nil {
			t.Fatal(err)
		}
		if err := indexer.Add(cached); err != nil {
			t.Fatal(err)
		}
		want = append(want, AsPod(cached))
	}
	if err := indexer.Add(pod("other", "pi-launcher", "launcher")); err != nil { // a whole pod, as tests add them
		t.Fatal(err)
	}
	l := Lister{Indexer: indexer}
	got, err := l.Pods("ns").Get("pi-worker-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want[1], got); diff != "" {
		t.Errorf("Get (-want +got):\n%s", diff)
	}
	if _, err := l.Pods("ns").Get("nothing"); !apierrors.IsNotFound(err) {
		t.Errorf("Get of a missing pod: %v, want NotFound", err)
	}
	if inNS, err := l.Pods("ns").List(labels.Everything()); err != nil || len(inNS) != 2 {
		t.Errorf("List of ns = %d pods, %v; want 2", len(inNS), err)
	}
	if all, err := l.List(labels.SelectorFromSet(labels.Set{"job": "pi"})); err != nil || len(all) != 3 {
		t.Errorf("List of every namespace = %d pods, %v; want 3", len(all), err)
	}
}

func TestSelect(t *testing.T) {
	tr := newTrimmer(cache.NewStore(cache.MetaNamespaceKeyFunc))
	var objs []any
	for _, name := range []string{"pi-worker-0", "pi-launcher", "pi-worker-1"} {
		role := "worker"
		if name == "pi-launcher" {
			role = "launcher"
		}
		cached, err := tr.Transform(pod("ns", name, role))
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, cached)
	}
	objs = append(objs, pod("ns", "pi-worker-2", "worker"), &corev1.ConfigMap{})
	got := Select(objs, labels.SelectorFromSet(labels.Set{"role": "worker"}))
	var names []string
	for _, p := range got {
		names = append(names, p.Name)
		if p.Status.Phase != corev1.PodRunning {
			t.Errorf("%s lost its phase", p.Name)
		}
	}
	if diff := cmp.Diff([]string{"pi-worker-0", "pi-worker-1", "pi-worker-2"}, names); diff != "" {
		t.Errorf("selected (-want +got):\n%s", diff)
	}
}

func TestEvents(t *testing.T) {
	cached, err := newTrimmer(nil).Transform(pod("ns", "pi-worker-0", "worker"))
	if err != nil {
		t.Fatal(err)
	}
	var got []any
	h := Events(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { got = append(got, obj) },
		UpdateFunc: func(oldObj, newObj any) { got = append(got, oldObj, newObj) },
		DeleteFunc: func(obj any) { got = append(got, obj) },
	})
	h.OnAdd(cached, false)
	h.OnUpdate(cached, cached)
	h.OnDelete(cached)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/pi-worker-0", Obj: cached})
	for i, obj := range got[:4] {
		if p, ok := obj.(*corev1.Pod); !ok || p.Name != "pi-worker-0" || p.Status.Phase != corev1.PodRunning {
			t.Errorf("event %d: %#v, want the pod", i, obj)
		}
	}
	tombstone, ok := got[4].(cache.DeletedFinalStateUnknown)
	if p, isPod := tombstone.Obj.(*corev1.Pod); !ok || !isPod || p.Name != "pi-worker-0" {
		t.Errorf("tombstone: %#v, want one of the pod", got[4])
	}
}

// TestTrimmerShares: the pods of a job share their owner, and their labels
// and annotations where equal, with the peer in the store, with their own
// earlier version, or, while the store is empty, with the pod trimmed last;
// pods of another job share nothing.
func TestTrimmerShares(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	tr := newTrimmer(store)
	add := func(p *corev1.Pod, stored bool) *Pod {
		t.Helper()
		obj, err := tr.Transform(p)
		if err != nil {
			t.Fatal(err)
		}
		if stored {
			if err := store.Add(obj); err != nil {
				t.Fatal(err)
			}
		}
		return obj.(*Pod)
	}
	l := add(pod("ns", "pi-launcher", "launcher"), false)
	w0 := add(pod("ns", "pi-worker-0", "worker"), true)
	if &l.OwnerReferences[0] != &w0.OwnerReferences[0] || !sameMap(l.Annotations, w0.Annotations) || sameMap(l.Labels, w0.Labels) {
		t.Error("a worker trimmed after the launcher does not share its owner and annotations alone")
	}
	w5 := add(pod("ns", "pi-worker-5", "worker"), true)
	if !sameMap(w5.Labels, w0.Labels) || &w5.OwnerReferences[0] != &w0.OwnerReferences[0] {
		t.Error("a worker does not share with the job's first worker")
	}
	again := add(pod("ns", "pi-worker-5", "worker"), true)
	if !sameMap(again.Labels, w5.Labels) {
		t.Error("a pod's new version does not share with the old one")
	}
	elsewhere := add(pod("other", "pi-worker-1", "worker"), true)
	if sameMap(elsewhere.Labels, w0.Labels) || &elsewhere.OwnerReferences[0] == &w0.OwnerReferences[0] {
		t.Error("pods of a job of the same name in another namespace share")
	}
}

// sameMap tells whether a and b are the same map, not merely equal ones.
func sameMap(a, b map[string]string) bool {
	return a != nil && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// TestTrimMetadata: of the metadata of another pod, the cache keeps what
// tells whether it holds a worker's name: its identity, controller and
// deletion, not its labels, annotations, other owners or field managers.
func TestTrimMetadata(t *testing.T) {
	deleted := metav1.Now()
	controller := metav1.OwnerReference{Kind: "ReplicaSet", Name: "rs", UID: "rs-uid", Controller: ptr.To(true)}
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: "pi-worker-0", Namespace: "ns", UID: "u", ResourceVersion: "7", DeletionTimestamp: &deleted,
		Labels: map[string]string{"app": "x"}, Annotations: map[string]string{"a": "b"},
		OwnerReferences: []metav1.OwnerReference{{Kind: "Other", Name: "o"}, controller},
		ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
	}}
	got, _ := TrimMetadata(m)
	want := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: "pi-worker-0", Namespace: "ns", UID: "u", ResourceVersion: "7", DeletionTimestamp: &deleted,
		OwnerReferences: []metav1.OwnerReference{controller},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("TrimMetadata (-want +got):\n%s", diff)
	}
	if got, _ := DropManagedFields(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}); got.(*corev1.ConfigMap).ManagedFields != nil {
		t.Error("DropManagedFields kept the field managers")
	}
}
