package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/kubeflow/mpi-operator/pkg/engine"
)

// TestDeletedJobLeavesNoMemory plays a job through what makes the
// controller remember it, deletes it and syncs its key: no store remembers
// it after. The stores are those of the controller's memory, which must
// list every store the controller has: one kept beside it would outlive
// the jobs it remembers.
func TestDeletedJobLeavesNoMemory(t *testing.T) {
	f := newFixture(t)
	job := oneOfTwoListed(f)
	// A third worker: the sync creates it, announces the step, lists the
	// Running worker 1 in the ConfigMap and refreshes the launcher. The
	// status counts one active worker of two: the change waits to be
	// written, and the sync after the wait writes it.
	job.Spec.MPIReplicaSpecs["Worker"].Replicas = ptr[int32](3)
	job.Status.ReplicaStatuses["Worker"].Active = 1
	job.ResourceVersion = "10"
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	if unlisted := c.memory.Unlisted(c); len(unlisted) > 0 {
		t.Fatalf("fields %v may remember a job outside the controller's memory", unlisted)
	}
	key := jobKey(job)
	for range 2 {
		if _, err := c.syncHandler(ctx, key); err != nil {
			t.Fatal(err)
		}
		f.clock.Step(engine.StatusBatchPeriod)
	}
	f.expectMPIWrites(statusUpdate())
	// The status write ended the wait, as every write does, so no sync
	// leaves both behind; the next change of the counts starts it again.
	c.StatusHold.Wait(key, f.clock.Now(), true)
	// Worker 1 turns Running, the informer tells (worker 2, whose creation
	// the controller waits to see, would end that wait).
	pending := existingWorkers(job, corev1.PodPending, 1)[0]
	running := pending.DeepCopy()
	running.Status.Phase, running.ResourceVersion = corev1.PodRunning, "2"
	c.podEvents.UpdateFunc(pending, running)
	for _, s := range c.memory {
		if !s.Holds(key) {
			t.Errorf("%T remembers nothing of the job: the test does not show that it is forgotten", s)
		}
	}

	if err := f.inf.jobs.Kubeflow().V1().MPIJobs().Informer().GetIndexer().Delete(job); err != nil {
		t.Fatal(err)
	}
	if _, err := c.syncHandler(ctx, key); err != nil {
		t.Fatal(err)
	}
	for _, s := range c.memory.Holding(key) {
		t.Errorf("%T still remembers the deleted job", s)
	}
}
