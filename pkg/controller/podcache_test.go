package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

func TestPodCache(t *testing.T) {
	job := defaulted(newTestJob("pi", 2))
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{
		cache.NamespaceIndex:  cache.MetaNamespaceIndexFunc,
		podsByControllerIndex: podControllerUID,
	})
	var want []*corev1.Pod
	for _, p := range existingWorkers(job, corev1.PodRunning, 0, 1) {
		cached, err := trimPod(p.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		if err := indexer.Add(cached); err != nil {
			t.Fatal(err)
		}
		want = append(want, asPod(cached))
	}
	elsewhere := existingWorkers(job, corev1.PodRunning, 2)[0]
	elsewhere.Namespace = "other"
	if err := indexer.Add(elsewhere); err != nil { // a whole pod, as tests add them
		t.Fatal(err)
	}
	c := podCache{indexer: indexer}

	got, err := c.Pods("ns").Get(want[1].Name)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want[1], got); diff != "" {
		t.Errorf("Get (-want +got):\n%s", diff)
	}
	if got.Status.Phase != corev1.PodRunning || got.Labels[labelMPIJobName] != "pi" || !metav1.IsControlledBy(got, job) {
		t.Errorf("Get lost what the controller reads: %+v", got)
	}
	if _, err := c.Pods("ns").Get("nothing"); !apierrors.IsNotFound(err) {
		t.Errorf("Get of a missing pod: %v, want NotFound", err)
	}
	inNS, err := c.Pods("ns").List(labels.Everything())
	if err != nil || len(inNS) != 2 {
		t.Errorf("List of ns = %d pods, %v; want 2", len(inNS), err)
	}
	all, err := c.List(labels.SelectorFromSet(labels.Set{labelMPIRole: roleWorker}))
	if err != nil || len(all) != 3 {
		t.Errorf("List of every namespace = %d pods, %v; want 3", len(all), err)
	}
}

func TestPodEvents(t *testing.T) {
	job := defaulted(newTestJob("pi", 1))
	pod := existingWorkers(job, corev1.PodRunning, 0)[0]
	cached, err := trimPod(pod.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	var got []any
	h := podEvents(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { got = append(got, obj) },
		UpdateFunc: func(oldObj, newObj any) { got = append(got, oldObj, newObj) },
		DeleteFunc: func(obj any) { got = append(got, obj) },
	})
	h.OnAdd(cached, false)
	h.OnUpdate(cached, cached)
	h.OnDelete(cached)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/" + pod.Name, Obj: cached})
	for i, obj := range got[:4] {
		if p, ok := obj.(*corev1.Pod); !ok || p.Name != pod.Name || p.Status.Phase != corev1.PodRunning {
			t.Errorf("event %d: %#v, want the pod", i, obj)
		}
	}
	tombstone, ok := got[4].(cache.DeletedFinalStateUnknown)
	if p, isPod := tombstone.Obj.(*corev1.Pod); !ok || !isPod || p.Name != pod.Name {
		t.Errorf("tombstone: %#v, want one of the pod", got[4])
	}
}
