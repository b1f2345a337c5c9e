package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
)

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("w-%d", i)
	}
	return out
}

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{
		{1, "w-0"},
		{2, "w-0, w-1"},
		{MaxNamesInEvent, "w-0, w-1, w-2, w-3, w-4, w-5, w-6, w-7, w-8, w-9"},
		{1000, "w-0, w-1, w-2, w-3, w-4, w-5, w-6, w-7, w-8, w-9 and 990 more"},
	} {
		if got := Summarize(names(tc.n)); got != tc.want {
			t.Errorf("Summarize(%d names) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// TestScaleStepsAnnounceEachStepOnce: the creations of one generation of the
// spec are one step, whatever the syncs they take; a new generation, or a
// new job of the same name, is a new step.
func TestScaleStepsAnnounceEachStepOnce(t *testing.T) {
	var s ScaleSteps
	steps := []struct {
		uid        string
		generation int64
		first      bool
	}{
		{"a", 1, true},
		{"a", 1, false},
		{"a", 2, true},
		{"a", 2, false},
		{"b", 2, true},
	}
	for i, st := range steps {
		e, first := s.Created("ns/pi", types.UID(st.uid), st.generation, 2, names(2))
		if first != st.first {
			t.Errorf("step %d (%s gen %d): first = %v, want %v", i, st.uid, st.generation, first, st.first)
		}
		if want := (Event{ReasonScalingUp, "Scaling up to 2 worker(s): creating w-0, w-1"}); first && e != want {
			t.Errorf("step %d: event %+v, want %+v", i, e, want)
		}
	}
	s.Forget("ns/pi")
	if _, first := s.Created("ns/pi", "b", 2, 2, names(2)); !first {
		t.Error("a forgotten job's step is not announced again")
	}
}

func TestDraining(t *testing.T) {
	want := Event{ReasonDraining, "Scaling down to 1 worker(s): w-0, w-1 left discover_hosts.sh and will be deleted in 5s"}
	if got := Draining(1, names(2), 5*time.Second); got != want {
		t.Errorf("Draining = %+v, want %+v", got, want)
	}
}

// TestDeletingDrainedWorkersHasNoEvent: the draining event announced the
// deletion of drained workers; a finished worker removed without draining
// has an event of its own.
func TestDeletingDrainedWorkersHasNoEvent(t *testing.T) {
	pod := func(name string, drained bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if drained {
			p.Annotations = map[string]string{elastic.AnnotationDrainingSince: "2026-01-02T15:04:05Z"}
		}
		return p
	}
	for _, tc := range []struct {
		pods  []*corev1.Pod
		want  Event
		event bool
	}{
		{[]*corev1.Pod{pod("a", true), pod("b", false)}, Event{ReasonScaledDown, "Deleted 1 worker(s): b"}, true},
		{[]*corev1.Pod{pod("a", true)}, Event{}, false},
		{nil, Event{}, false},
	} {
		got, event := Deleted(tc.pods)
		if diff := cmp.Diff(tc.want, got); diff != "" || event != tc.event {
			t.Errorf("Deleted: %v (-want +got):\n%s", event, diff)
		}
	}
}
