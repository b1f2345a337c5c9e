package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	core "k8s.io/client-go/testing"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
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
		if got := discoverabilityChanged(tc.old, tc.new); got != tc.want {
			t.Errorf("%s: discoverabilityChanged = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The events that change what discover_hosts.sh may list reach the lane;
// the others reach the main queue only.
func TestEventsReachTheDiscoveryLane(t *testing.T) {
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

	cases := []struct {
		name  string
		event func()
		want  int
	}{
		{"worker turns Running", func() { f.c.handlePodUpdate(worker, running) }, 1},
		{"worker relabelled", func() { f.c.handlePodUpdate(worker, relabelled) }, 0},
		{"Running worker deleted", func() { f.c.handlePodGone(running) }, 1},
		{"worker replicas changed", func() { f.c.enqueueResize(stored, scaled) }, 1},
		{"other change of the job", func() { f.c.enqueueResize(stored, suspended) }, 0},
		{"EndpointSlice of the job's Service", func() { f.c.handleSlice(slice) }, 1},
		{"EndpointSlice of another Service", func() { f.c.handleSlice(otherSlice) }, 0},
	}
	for _, tc := range cases {
		for f.c.discoveryQueue.Len() > 0 {
			key, _ := f.c.discoveryQueue.Get()
			f.c.discoveryQueue.Done(key)
		}
		tc.event()
		if got := f.c.discoveryQueue.Len(); got != tc.want {
			t.Errorf("%s: %d keys in the lane, want %d", tc.name, got, tc.want)
		}
	}
}

// A sync of the lane is the main sync: a scale-in's victim is marked
// draining and leaves discover_hosts.sh at once.
func TestDiscoveryLaneSyncs(t *testing.T) {
	f := newFixture(t).start(storedJob(2, withElastic(1, 4)))
	runningJob(t, f, "job-worker-0", "job-worker-1")
	f.updateJob(func(j *v2beta1.MPIJob) {
		j.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeWorker].Replicas = ptr(int32(1))
	})
	f.refresh()
	for f.c.queue.Len() > 0 {
		key, _ := f.c.queue.Get()
		f.c.queue.Done(key)
	}
	f.c.discoveryQueue.Add(testKey)
	if !f.c.processNextDiscovery(f.ctx) {
		t.Fatal("the lane shut down")
	}
	if _, discover := f.files(); discover != script("job-worker-0") {
		t.Errorf("discover_hosts.sh after the lane's sync:\n%s", discover)
	}
	if !hasEvent(f.events(), "Normal WorkersDraining") {
		t.Error("no WorkersDraining event from the lane's sync")
	}
	if f.c.discoveryQueue.Len() != 0 {
		t.Error("the lane kept the key")
	}
}

// A conflict of the lane's sync (the cache a moment behind the main
// queue's write) is retried in the lane, a few times, before the main
// queue takes it over.
func TestDiscoveryLaneRetriesConflicts(t *testing.T) {
	f := newFixture(t).start(storedJob(2, withElastic(1, 4)))
	runningJob(t, f, "job-worker-0", "job-worker-1")
	f.updateJob(func(j *v2beta1.MPIJob) {
		j.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeWorker].Replicas = ptr(int32(1))
	})
	f.refresh()
	f.kube.PrependReactor("update", "configmaps", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "job-config", nil)
	})
	for f.c.queue.Len() > 0 {
		key, _ := f.c.queue.Get()
		f.c.queue.Done(key)
	}
	for try := 1; try <= maxDiscoveryRetries; try++ {
		f.refresh() // the cache shows the drain marks; the ConfigMap write conflicts again
		f.c.discoveryQueue.Add(testKey)
		f.c.processNextDiscovery(f.ctx)
		if got := f.c.discoveryQueue.NumRequeues(testKey); got != try {
			t.Fatalf("try %d: %d requeues in the lane, want %d", try, got, try)
		}
		if f.c.queue.NumRequeues(testKey) != 0 {
			t.Fatalf("try %d: the main queue took the conflict over", try)
		}
	}
	f.refresh()
	f.c.discoveryQueue.Add(testKey)
	f.c.processNextDiscovery(f.ctx)
	if f.c.discoveryQueue.NumRequeues(testKey) != 0 || f.c.queue.NumRequeues(testKey) != 1 {
		t.Errorf("after %d retries: lane requeues %d, main queue requeues %d; want 0 and 1",
			maxDiscoveryRetries, f.c.discoveryQueue.NumRequeues(testKey), f.c.queue.NumRequeues(testKey))
	}
}
