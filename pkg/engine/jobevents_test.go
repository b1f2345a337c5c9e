package engine

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"
)

// TestJobEvents: every event of a job queues it; an update urgently only
// when resized says so.
func TestJobEvents(t *testing.T) {
	b := NewBase(fake.NewClientset(), nil, nil, nil, testingclock.NewFakeClock(time.Unix(1000, 0)))
	defer b.Queue.ShutDown()
	job := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job"}}
	h := b.JobEvents(func(_, newObj any) bool { return newObj.(metav1.Object).GetLabels()["resized"] == "yes" })
	resized := job.DeepCopy()
	resized.Labels = map[string]string{"resized": "yes"}
	for _, tc := range []struct {
		name         string
		event        func()
		wantPriority int
	}{
		{"add", func() { h.AddFunc(job) }, 0},
		{"update", func() { h.UpdateFunc(job, job) }, 0},
		{"resize", func() { h.UpdateFunc(job, resized) }, 1},
		{"delete", func() { h.DeleteFunc(job) }, 0},
		{"tombstone", func() { h.DeleteFunc(cache.DeletedFinalStateUnknown{Key: "ns/job", Obj: job}) }, 0},
	} {
		tc.event()
		got, priority, _ := b.Queue.GetWithPriority()
		b.Queue.Done(got)
		if got != "ns/job" || priority != tc.wantPriority {
			t.Errorf("%s: queued %q at priority %d, want ns/job at %d", tc.name, got, priority, tc.wantPriority)
		}
	}
}

// TestOwnedEvents: every event of a child queues the job that controls
// it, as ControllerKey reads it; a child of no job, nothing.
func TestOwnedEvents(t *testing.T) {
	b := NewBase(fake.NewClientset(), nil, nil, nil, testingclock.NewFakeClock(time.Unix(1000, 0)))
	defer b.Queue.ShutDown()
	h := b.OwnedEvents(func(obj any) (string, bool) { return ControllerKey(obj, "kubeflow.org", "MPIJob") })
	yes := true
	child := func(apiVersion, kind string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job-config",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "job", Controller: &yes}}}}
	}
	for _, obj := range []any{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}},
		child("kubeflow.org/v1", "TFJob"),
		child("example.com/v1", "MPIJob"),
		child("kubeflow.org", "MPIJob"),
		child("kubeflow.org/v1/extra", "MPIJob"),
		"not an object",
	} {
		h.AddFunc(obj)
	}
	if n := b.Queue.Len(); n != 0 {
		t.Fatalf("children of no MPIJob queued %d keys", n)
	}
	for name, event := range map[string]func(){
		"add":       func() { h.AddFunc(child("kubeflow.org/v2beta1", "MPIJob")) },
		"update":    func() { h.UpdateFunc(nil, child("kubeflow.org/v1", "MPIJob")) },
		"delete":    func() { h.DeleteFunc(child("kubeflow.org/v1", "MPIJob")) },
		"tombstone": func() { h.DeleteFunc(cache.DeletedFinalStateUnknown{Obj: child("kubeflow.org/v1", "MPIJob")}) },
	} {
		event()
		got, _ := b.Queue.Get()
		b.Queue.Done(got)
		if got != "ns/job" {
			t.Errorf("%s: queued %q, want ns/job", name, got)
		}
	}
}

func TestNames(t *testing.T) {
	for apiVersion, want := range map[string]bool{
		"kubeflow.org/v1":       true,
		"kubeflow.org/v2beta1":  true,
		"kubeflow.org":          false,
		"kubeflow.org/":         false,
		"v1":                    false,
		"":                      false,
		"other.org/v1":          false,
		"kubeflow.org/v1/extra": false,
	} {
		for kind, wantKind := range map[string]bool{"MPIJob": true, "TFJob": false} {
			ref := &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind}
			if got := Names(ref, "kubeflow.org", "MPIJob"); got != (want && wantKind) {
				t.Errorf("Names(%s %s) = %v, want %v", apiVersion, kind, got, want && wantKind)
			}
		}
	}
}
