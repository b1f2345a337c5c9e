package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestDeletedJobLeavesNoMemory plays a job through what makes the
// controller remember it, deletes it and syncs its key: no store remembers
// it after. The stores are those of the controller's memory, which must
// list every store the controller has: one kept beside it would outlive
// the jobs it remembers.
func TestDeletedJobLeavesNoMemory(t *testing.T) {
	f := newFixture(t).start(storedJob(2, withElastic(1, 4)))
	if unlisted := f.c.memory.Unlisted(f.c); len(unlisted) > 0 {
		t.Fatalf("fields %v may remember a job outside the controller's memory", unlisted)
	}
	// The job runs: its launcher was told of the script that lists both
	// workers.
	runningJob(t, f, "job-worker-0", "job-worker-1")
	// Two more workers: the sync creates them, which the cache does not
	// show yet, announces the step and writes the status; a change of the
	// replica counts alone then waits to be written.
	f.updateJob(setWorkers(4))
	f.refresh()
	f.sync()
	f.c.StatusHold.Wait(testKey, f.clock.Now(), true)
	// Worker 2 turns Running, the informer tells; worker 3's creation is
	// still to be seen.
	pending := f.pod("job-worker-2")
	running := pending.DeepCopy()
	running.Status.Phase, running.ResourceVersion = corev1.PodRunning, "2"
	f.c.podEvents.UpdateFunc(pending, running)
	for _, s := range f.c.memory {
		if !s.Holds(testKey) {
			t.Errorf("%T remembers nothing of the job: the test does not show that it is forgotten", s)
		}
	}

	job, err := f.c.jobLister.MPIJobs("ns").Get("job")
	must(t, err)
	must(t, f.inf.jobs.Kubeflow().V2beta1().MPIJobs().Informer().GetIndexer().Delete(job))
	f.sync()
	for _, s := range f.c.memory.Holding(testKey) {
		t.Errorf("%T still remembers the deleted job", s)
	}
}
