package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	core "k8s.io/client-go/testing"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/engine"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

func TestDiscoverabilityChanged(t *testing.T) {
	running := testWorker("0")
	running.Labels = podLabels(newTestJob(1), roleWorker)
	running.Status.Phase = corev1.PodRunning
	pending := running.DeepCopy()
	pending.Status.Phase = corev1.PodPending
	draining := running.DeepCopy()
	draining.Annotations = map[string]string{elastic.AnnotationDrainingSince: "2026-03-04T05:06:07Z"}
	relabelled := running.DeepCopy()
	relabelled.Labels["extra"] = "x"
	launcher := running.DeepCopy()
	launcher.Labels[labelJobRole] = roleLauncher
	launcherPending := launcher.DeepCopy()
	launcherPending.Status.Phase = corev1.PodPending

	cases := []struct {
		name     string
		old, new *corev1.Pod
		want     bool
	}{
		{"turns Running", pending, running, true},
		{"marked draining", running, draining, true},
		{"Running worker gone", running, nil, true},
		{"Pending worker gone", pending, nil, false},
		{"new Running worker", nil, running, true},
		{"other change", running, relabelled, false},
		{"launcher turns Running", launcherPending, launcher, false},
	}
	for _, tc := range cases {
		if got := elastic.DiscoverabilityChanged(tc.old, tc.new, isWorker); got != tc.want {
			t.Errorf("%s: discoverabilityChanged = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The events that change what discover_hosts.sh may list queue their job
// urgently; the others queue it without urgency, or not at all.
func TestEventsThatChangeTheScriptAreUrgent(t *testing.T) {
	f := newFixture(t).start(storedJob(2, withElastic(1, 4)))
	f.sync()
	f.refresh()
	worker := f.pod("job-worker-0")
	running := worker.DeepCopy()
	running.Status.Phase = corev1.PodRunning
	relabelled := worker.DeepCopy()
	relabelled.Labels["extra"] = "x"
	job := f.c.jobLister.MPIJobs("ns").Get
	stored, err := job("job")
	must(t, err)
	scaled := stored.DeepCopy()
	scaled.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeWorker].Replicas = ptr(int32(3))
	suspended := stored.DeepCopy()
	suspended.Spec.RunPolicy.Suspend = ptr(true)
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "job-abcde", Namespace: "ns",
		Labels: map[string]string{labelApp: "job"}}}
	otherSlice := slice.DeepCopy()
	otherSlice.Labels[labelApp] = "not-a-job"

	const no, plain, urgent = -1, 0, 1 // no: not queued; else the priority
	cases := []struct {
		name  string
		event func()
		want  int
	}{
		{"worker turns Running", func() { f.c.podEvents.UpdateFunc(worker, running) }, urgent},
		{"worker relabelled", func() { f.c.podEvents.UpdateFunc(worker, relabelled) }, plain},
		{"Running worker listed by the informer", func() { f.c.podEvents.AddFunc(running) }, plain},
		{"Running worker deleted", func() { f.c.podEvents.DeleteFunc(running) }, urgent},
		{"Pending worker deleted", func() { f.c.podEvents.DeleteFunc(worker) }, plain},
		{"worker replicas changed", func() { f.c.jobEvents.UpdateFunc(stored, scaled) }, urgent},
		{"other change of the job", func() { f.c.jobEvents.UpdateFunc(stored, suspended) }, plain},
		{"EndpointSlice of the job's Service", func() { f.c.handleSlice(slice, true) }, urgent},
		{"EndpointSlice listed by the informer", func() { f.c.handleSlice(slice, false) }, plain},
		{"EndpointSlice of another Service", func() { f.c.handleSlice(otherSlice, true) }, no},
	}
	for _, tc := range cases {
		drain(f)
		tc.event()
		got := no
		switch n := f.c.Queue.Len(); n {
		case 0:
		case 1:
			key, priority, _ := f.c.Queue.GetWithPriority()
			f.c.Queue.Done(key)
			if key != testKey {
				t.Errorf("%s: queued %q, want %q", tc.name, key, testKey)
			}
			got = priority
		default:
			t.Errorf("%s: %d keys queued, want at most 1", tc.name, n)
		}
		if got != tc.want {
			t.Errorf("%s: queued at %d, want %d (-1: not queued, 1: urgent)", tc.name, got, tc.want)
		}
	}
}

// An urgent key is synced before the keys queued earlier without urgency,
// by the one sync: a scale-in's victim is marked draining and leaves
// discover_hosts.sh at once.
func TestUrgentKeyIsSyncedFirst(t *testing.T) {
	f := newFixture(t)
	scaleIn := scaleInToOne(t, f)
	drain(f)
	const other = "ns/other"
	f.c.Queue.Add(other)
	scaleIn()
	if !f.c.ProcessNext(f.ctx, f.c.syncHandler) {
		t.Fatal("the queue shut down")
	}
	f.expectListed("job-worker-0")
	f.expectEvent("Normal WorkersDraining")
	// The job waits for its drain period; the other key is next.
	if n := f.c.Queue.Len(); n != 1 {
		t.Fatalf("%d keys ready after the first sync, want 1", n)
	}
	if key, priority, _ := f.c.Queue.GetWithPriority(); key != other || priority != 0 {
		t.Errorf("next key %q at priority %d, want %q at 0", key, priority, other)
	}
}

// A sync that conflicts is retried through the queue's rate limiter, which
// brings the key back on its own after a short delay and counts the
// retries until a sync goes through.
func TestConflictIsRetriedWithBackoff(t *testing.T) {
	f := newFixture(t)
	scaleIn := scaleInToOne(t, f)
	const conflicts = 2
	refused := 0
	f.kube.PrependReactor("update", "configmaps", func(core.Action) (bool, runtime.Object, error) {
		if refused == conflicts {
			return false, nil, nil
		}
		refused++
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "job-config", nil)
	})
	drain(f)
	scaleIn()
	for try := 1; try <= conflicts; try++ {
		f.c.ProcessNext(f.ctx, f.c.syncHandler)
		if n := f.c.Queue.Len(); n != 0 {
			t.Fatalf("try %d: %d keys ready at once after the conflict, want 0", try, n)
		}
		if got := f.c.Queue.NumRequeues(testKey); got != try {
			t.Fatalf("try %d: %d requeues, want %d", try, got, try)
		}
		err := wait.PollUntilContextTimeout(f.ctx, time.Millisecond, 10*time.Second, true,
			func(context.Context) (bool, error) { return f.c.Queue.Len() == 1, nil })
		if err != nil {
			t.Fatalf("try %d: the key did not come back: %v", try, err)
		}
		f.refresh() // the cache shows the drain marks
	}
	f.c.ProcessNext(f.ctx, f.c.syncHandler)
	if refused != conflicts {
		t.Errorf("%d ConfigMap writes refused, want %d", refused, conflicts)
	}
	if got := f.c.Queue.NumRequeues(testKey); got != 0 {
		t.Errorf("%d requeues after the sync went through, want 0", got)
	}
	f.expectListed("job-worker-0")
}

// scaleInToOne starts f on an elastic job of two running workers whose
// replicas then go down to one, and returns how the informers would tell
// the controller of the change.
func scaleInToOne(t *testing.T, f *fixture) func() {
	f.start(storedJob(2, withElastic(1, 4)))
	runningJob(t, f, "job-worker-0", "job-worker-1")
	old, err := f.c.jobLister.MPIJobs("ns").Get("job")
	must(t, err)
	f.updateJob(setWorkers(1))
	f.refresh()
	return func() {
		scaled, err := f.c.jobLister.MPIJobs("ns").Get("job")
		must(t, err)
		f.c.jobEvents.UpdateFunc(old, scaled)
	}
}

// A sync whose job is queued urgently while it writes the files gives way
// right after them: it creates no worker and writes no status, and the job
// is queued again, urgently, for the sync that carries on, which creates
// the workers.
func TestSyncGivesWayAfterTheFiles(t *testing.T) {
	f := newFixture(t).start(storedJob(2, withElastic(1, 4)))
	runningJob(t, f, "job-worker-0", "job-worker-1")
	f.updateJob(func(j *v2beta1.MPIJob) {
		j.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeWorker].Replicas = ptr(int32(4))
		// A status that must be written: a count that is off, and has
		// waited long enough (engine.StatusHold).
		j.Status.ReplicaStatuses[v2beta1.MPIReplicaTypeWorker].Active = 7
	})
	f.c.StatusHold.Wait(testKey, f.clock.Now().Add(-engine.StatusBatchPeriod), true)
	f.refresh()
	drain(f)
	f.kube.PrependReactor("update", "configmaps", func(core.Action) (bool, runtime.Object, error) {
		reconcile.AddUrgent(f.c.Queue, testKey)
		return false, nil, nil
	})
	f.c.Queue.Add(testKey)
	f.c.ProcessNext(f.ctx, f.c.syncHandler)
	f.expectWrites(update("configmaps", "job-config"))
	key, priority, _ := f.c.Queue.GetWithPriority()
	if key != testKey || priority != 1 {
		t.Fatalf("queued %q at priority %d, want %q, urgently", key, priority, testKey)
	}
	f.c.Queue.Done(key)

	f.refresh()
	f.kube.ReactionChain = f.kube.ReactionChain[1:]
	f.c.Queue.Add(testKey)
	f.c.ProcessNext(f.ctx, f.c.syncHandler)
	if w := f.writes(); !slices.Contains(w, create("pods", "job-worker-3")) ||
		!slices.Contains(w, statusUpdate()) {
		t.Errorf("the next sync wrote %v, want the workers created and the status", w)
	}
}

// The EndpointSlice controller moves endpoints between the slices of a
// Service, and may write the slice that loses one before the slice that
// gains it: for a moment a listed worker's name resolves nowhere. The
// worker stays listed, and nothing is written, then or once the endpoint
// is back.
func TestListedWorkerStaysListedWhileItsEndpointMoves(t *testing.T) {
	f := newFixture(t).start(storedJob(2))
	runningJob(t, f, "job-worker-0", "job-worker-1")
	want := script("job-worker-0", "job-worker-1")
	if _, discover := f.files(); discover != want {
		t.Fatalf("discover_hosts.sh at the start:\n%s", discover)
	}
	for _, published := range [][]string{{"job-worker-0"}, {"job-worker-0", "job-worker-1"}} {
		f.publish("job", published...)
		f.refresh()
		f.sync()
		f.expectWrites()
		f.expectListed("job-worker-0", "job-worker-1")
	}
}
