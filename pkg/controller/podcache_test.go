package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

func TestPodCache(t *testing.T) {
	job := defaulted(newTestJob("pi", 2))
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{
		cache.NamespaceIndex:      cache.MetaNamespaceIndexFunc,
		reconcile.ByControllerUID: reconcile.ControllerUID,
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

func TestTrimPodDropsIndexLabelsTheNameRepeats(t *testing.T) {
	job := defaulted(newTestJob("pi", 4))
	for name, tc := range map[string]struct {
		index string // both index labels; "" for none
		name  string
		kept  bool
	}{
		"the name's suffix":             {index: "3", name: "pi-worker-3"},
		"no labels":                     {name: "pi-worker-3"},
		"another index than the name's": {index: "5", name: "pi-worker-3", kept: true},
		"a name of another form":        {index: "3", name: "pi-worker-3-b", kept: true},
	} {
		t.Run(name, func(t *testing.T) {
			pod := newWorker(job, 3, "")
			pod.Name = tc.name
			delete(pod.Labels, labelReplicaIndex)
			delete(pod.Labels, "training.kubeflow.org/replica-index")
			if tc.index != "" {
				pod.Labels[labelReplicaIndex] = tc.index
				pod.Labels["training.kubeflow.org/replica-index"] = tc.index
			}
			wantIndex, wantOK := workerIndex(job, pod)
			cached, err := trimPod(pod)
			if err != nil {
				t.Fatal(err)
			}
			got := asPod(cached)
			if _, kept := got.Labels[labelReplicaIndex]; kept != tc.kept {
				t.Errorf("index label kept = %v, want %v", kept, tc.kept)
			}
			if i, ok := workerIndex(job, got); i != wantIndex || ok != wantOK {
				t.Errorf("index from the cache = %d, %v; from the pod %d, %v", i, ok, wantIndex, wantOK)
			}
		})
	}
}

func TestPodTrimmerShares(t *testing.T) {
	job := defaulted(newTestJob("pi", 3))
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	trim := newPodTrimmer(store).trim
	add := func(p *corev1.Pod) *cachedPod {
		t.Helper()
		obj, err := trim(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Add(obj); err != nil {
			t.Fatal(err)
		}
		return obj.(*cachedPod)
	}
	w0 := add(newWorker(job, 0, ""))
	w2 := add(newWorker(job, 2, ""))
	if !sameMap(w0.Labels, w2.Labels) || &w0.OwnerReferences[0] != &w2.OwnerReferences[0] {
		t.Error("two workers of one job do not share their labels and owner")
	}
	l := add(newLauncher(job, launcherOptions{}))
	if sameMap(l.Labels, w0.Labels) || &l.OwnerReferences[0] != &w0.OwnerReferences[0] {
		t.Error("the launcher should share the owner but not the labels of the workers")
	}
	// A new version of a pod shares with the one it replaces.
	running := withPhase(newWorker(job, 2, ""), corev1.PodRunning)
	running.Labels["extra"] = "dropped"
	w2b := add(running)
	if !sameMap(w2b.Labels, w2.Labels) || w2b.Phase != corev1.PodRunning {
		t.Error("a pod's new version does not share its labels with the old one")
	}
	// Another job of the same name in another namespace shares nothing.
	other := defaulted(newTestJob("pi", 3))
	other.Namespace, other.UID = "elsewhere", "other-uid"
	o0 := add(newWorker(other, 0, ""))
	if sameMap(o0.Labels, w0.Labels) && &o0.OwnerReferences[0] == &w0.OwnerReferences[0] {
		t.Error("pods of two jobs share their owner")
	}
	if o0.OwnerReferences[0].UID != "other-uid" || o0.Namespace != "elsewhere" {
		t.Errorf("the other job's pod has the wrong owner or namespace: %+v", o0.ObjectMeta)
	}
}

// sameMap tells whether a and b are the same map, not merely equal ones.
func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) || a == nil || b == nil {
		return false
	}
	a["\x00probe"] = "x"
	_, same := b["\x00probe"]
	delete(a, "\x00probe")
	return same
}

// At the start the informer trims the whole list before its store holds
// any of it: the pods of a job share with the one trimmed before.
func TestPodTrimmerSharesBeforeTheStoreFills(t *testing.T) {
	job := defaulted(newTestJob("pi", 3))
	trim := newPodTrimmer(cache.NewStore(cache.MetaNamespaceKeyFunc)).trim
	var got []*cachedPod
	for _, p := range []*corev1.Pod{newLauncher(job, launcherOptions{}), newWorker(job, 0, ""), newWorker(job, 1, "")} {
		obj, err := trim(p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, obj.(*cachedPod))
	}
	if &got[0].OwnerReferences[0] != &got[1].OwnerReferences[0] || &got[1].OwnerReferences[0] != &got[2].OwnerReferences[0] {
		t.Error("the job's pods do not share their owner")
	}
	if !sameMap(got[1].Labels, got[2].Labels) || sameMap(got[0].Labels, got[1].Labels) {
		t.Error("the workers should share their labels, and not with the launcher")
	}
}
