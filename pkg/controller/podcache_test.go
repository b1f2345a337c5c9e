package controller

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeflow/mpi-operator/pkg/podcache"
)

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
			got := podcache.AsPod(trimPod(pod))
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
	trim := newPodTrimmer(store).Transform
	add := func(p *corev1.Pod) *podcache.Pod {
		t.Helper()
		obj, err := trim(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Add(obj); err != nil {
			t.Fatal(err)
		}
		return obj.(*podcache.Pod)
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
	return a != nil && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// At the start the informer trims the whole list before its store holds
// any of it: the pods of a job share with the one trimmed before.
func TestPodTrimmerSharesBeforeTheStoreFills(t *testing.T) {
	job := defaulted(newTestJob("pi", 3))
	trim := newPodTrimmer(cache.NewStore(cache.MetaNamespaceKeyFunc)).Transform
	var got []*podcache.Pod
	for _, p := range []*corev1.Pod{newLauncher(job, launcherOptions{}), newWorker(job, 0, ""), newWorker(job, 1, "")} {
		obj, err := trim(p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, obj.(*podcache.Pod))
	}
	if &got[0].OwnerReferences[0] != &got[1].OwnerReferences[0] || &got[1].OwnerReferences[0] != &got[2].OwnerReferences[0] {
		t.Error("the job's pods do not share their owner")
	}
	if !sameMap(got[1].Labels, got[2].Labels) || sameMap(got[0].Labels, got[1].Labels) {
		t.Error("the workers should share their labels, and not with the launcher")
	}
}
