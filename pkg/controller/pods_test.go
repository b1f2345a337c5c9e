package controller

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
)

// TestDeletingDrainedWorkersHasNoEvent: the draining event announced the
// deletion of drained workers; a finished worker removed without draining
// has an event of its own.
func TestDeletingDrainedWorkersHasNoEvent(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 2)
	drained := f.pods[0].DeepCopy()
	drained.Annotations = map[string]string{elastic.AnnotationDrainingSince: testNow.Format("2006-01-02T15:04:05Z")}
	finished := f.pods[1].DeepCopy()
	finished.Status.Phase = corev1.PodSucceeded
	ctx, c := f.readyController(nil)
	if err := c.deleteWorkers(ctx, defaulted(job), []*corev1.Pod{drained, finished}); err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("Normal WorkersScaledDown Deleted 1 worker(s): %s", finished.Name)}
	if got := f.events(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events %q, want %q", got, want)
	}
}
