package controller

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
)

func TestSummarize(t *testing.T) {
	names := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("w-%d", i)
		}
		return out
	}
	for _, tc := range []struct {
		n    int
		want string
	}{
		{1, "w-0"},
		{2, "w-0, w-1"},
		{maxNamesInEvent, "w-0, w-1, w-2, w-3, w-4, w-5, w-6, w-7, w-8, w-9"},
		{1000, "w-0, w-1, w-2, w-3, w-4, w-5, w-6, w-7, w-8, w-9 and 990 more"},
	} {
		if got := summarize(names(tc.n)); got != tc.want {
			t.Errorf("summarize(%d names) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// TestScaleStepsAnnounceEachStepOnce: the creations of one generation of the
// spec are one step, whatever the syncs they take; a new generation, or a
// new job of the same name, is a new step.
func TestScaleStepsAnnounceEachStepOnce(t *testing.T) {
	job := func(uid string, generation int64) *kubeflow.MPIJob {
		return &kubeflow.MPIJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pi", UID: k8stypes.UID("uid-" + uid), Generation: generation}}
	}
	var s scaleSteps
	steps := []struct {
		job   *kubeflow.MPIJob
		first bool
	}{
		{job("a", 1), true},
		{job("a", 1), false},
		{job("a", 2), true},
		{job("a", 2), false},
		{job("b", 2), true},
	}
	for i, st := range steps {
		if got := s.first(st.job); got != st.first {
			t.Errorf("step %d (%s gen %d): first = %v, want %v", i, st.job.UID, st.job.Generation, got, st.first)
		}
	}
	s.forget("ns/pi")
	if !s.first(job("b", 2)) {
		t.Error("a forgotten job's step is not announced again")
	}
}

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
