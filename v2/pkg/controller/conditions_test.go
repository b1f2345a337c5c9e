package controller

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow/mpi-operator/pkg/engine"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

func TestSetCondition(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	cond := func(t v2beta1.JobConditionType, s corev1.ConditionStatus, reason string, update, transition metav1.Time) v2beta1.JobCondition {
		return v2beta1.JobCondition{Type: t, Status: s, Reason: reason, Message: reason + " message",
			LastUpdateTime: update, LastTransitionTime: transition}
	}
	// old is a condition set at t0, set one set at t1, when setCondition runs.
	old := func(t v2beta1.JobConditionType, s corev1.ConditionStatus, reason string) v2beta1.JobCondition {
		return cond(t, s, reason, t0, t0)
	}
	set := func(t v2beta1.JobConditionType, s corev1.ConditionStatus, reason string) v2beta1.JobCondition {
		return cond(t, s, reason, t1, t1)
	}
	const (
		yes        = corev1.ConditionTrue
		no         = corev1.ConditionFalse
		restarting = "MPIJobRestarting"
	)
	created := old(v2beta1.JobCreated, yes, reconcile.ReasonCreated)
	type conds = []v2beta1.JobCondition
	cases := []struct {
		name      string
		before    conds
		t         v2beta1.JobConditionType
		s         corev1.ConditionStatus
		reason    string
		after     conds
		unchanged bool
	}{
		{
			name: "first condition",
			t:    v2beta1.JobCreated, s: yes, reason: reconcile.ReasonCreated,
			after: conds{set(v2beta1.JobCreated, yes, reconcile.ReasonCreated)},
		},
		{
			name:   "same condition again changes nothing",
			before: conds{created},
			t:      v2beta1.JobCreated, s: yes, reason: reconcile.ReasonCreated,
			after: conds{created}, unchanged: true,
		},
		{
			name:   "a new reason keeps the transition time and the place",
			before: conds{old(v2beta1.JobFailed, yes, reconcile.ReasonEvicted), created},
			t:      v2beta1.JobFailed, s: yes, reason: reconcile.ReasonFailed,
			after: conds{cond(v2beta1.JobFailed, yes, reconcile.ReasonFailed, t1, t0), created},
		},
		{
			name:   "running drops restarting",
			before: conds{created, old(v2beta1.JobRestarting, yes, restarting)},
			t:      v2beta1.JobRunning, s: yes, reason: reconcile.ReasonRunning,
			after: conds{created, set(v2beta1.JobRunning, yes, reconcile.ReasonRunning)},
		},
		{
			name:   "restarting drops running",
			before: conds{old(v2beta1.JobRunning, yes, reconcile.ReasonRunning)},
			t:      v2beta1.JobRestarting, s: yes, reason: restarting,
			after: conds{set(v2beta1.JobRestarting, yes, restarting)},
		},
		{
			name:   "running False keeps restarting",
			before: conds{old(v2beta1.JobRestarting, yes, restarting)},
			t:      v2beta1.JobRunning, s: no, reason: reasonSuspended,
			after: conds{old(v2beta1.JobRestarting, yes, restarting), set(v2beta1.JobRunning, no, reasonSuspended)},
		},
		{
			name:   "success turns running False",
			before: conds{created, old(v2beta1.JobRunning, yes, reconcile.ReasonRunning)},
			t:      v2beta1.JobSucceeded, s: yes, reason: reconcile.ReasonSucceeded,
			after: conds{created, set(v2beta1.JobRunning, no, reconcile.ReasonRunning), set(v2beta1.JobSucceeded, yes, reconcile.ReasonSucceeded)},
		},
		{
			name:   "resume flips suspended to False",
			before: conds{old(v2beta1.JobSuspended, yes, reasonSuspended)},
			t:      v2beta1.JobSuspended, s: no, reason: reasonResumed,
			after: conds{set(v2beta1.JobSuspended, no, reasonResumed)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status := &v2beta1.JobStatus{Conditions: tc.before}
			changed := setCondition(status, tc.t, tc.s, tc.reason, tc.reason+" message", t1)
			if changed == tc.unchanged {
				t.Errorf("changed = %v, want %v", changed, !tc.unchanged)
			}
			if diff := cmp.Diff(tc.after, status.Conditions); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIsFinished(t *testing.T) {
	for _, tc := range []struct {
		conds []v2beta1.JobCondition
		want  bool
	}{
		{nil, false},
		{[]v2beta1.JobCondition{{Type: v2beta1.JobRunning, Status: corev1.ConditionTrue}}, false},
		{[]v2beta1.JobCondition{{Type: v2beta1.JobSucceeded, Status: corev1.ConditionTrue}}, true},
		{[]v2beta1.JobCondition{{Type: v2beta1.JobFailed, Status: corev1.ConditionTrue}}, true},
		{[]v2beta1.JobCondition{{Type: v2beta1.JobFailed, Status: corev1.ConditionFalse}}, false},
	} {
		if got := conditions.Finished(tc.conds); got != tc.want {
			t.Errorf("Finished(%v) = %v, want %v", tc.conds, got, tc.want)
		}
	}
}

// TestCountChangesWait: a change of the replica counts alone waits
// engine.StatusBatchPeriod, as v1's does, so that the workers of a resize
// are counted in one write; a change of a condition is written at once.
func TestCountChangesWait(t *testing.T) {
	f := newFixture(t).start(storedJob(2))
	runningJob(t, f, "job-worker-0", "job-worker-1")
	f.holdStatus = true
	f.setPhase(corev1.PodPending, "job-worker-1")
	if d := f.step(); d != engine.StatusBatchPeriod {
		t.Errorf("requeue after %v, want %v", d, engine.StatusBatchPeriod)
	}
	if w := f.writes(); slices.Contains(w, statusUpdate()) {
		t.Errorf("the count was written at once: %v", w)
	}
	f.clock.Step(engine.StatusBatchPeriod / 2)
	if d := f.step(); d != engine.StatusBatchPeriod/2 {
		t.Errorf("second sync: requeue after %v, want %v", d, engine.StatusBatchPeriod/2)
	}
	f.expectWrites()
	f.clock.Step(engine.StatusBatchPeriod / 2)
	f.step()
	f.expectWrites(statusUpdate())
	if got := f.status().ReplicaStatuses[v2beta1.MPIReplicaTypeWorker].Active; got != 1 {
		t.Errorf("active workers written %d, want 1", got)
	}

	// A condition goes at once, with the counts.
	f.setPhase(corev1.PodRunning, "job-worker-1")
	f.updateJob(func(j *v2beta1.MPIJob) { j.Spec.RunPolicy.Suspend = ptr(true) })
	f.step()
	f.expectCondition(v2beta1.JobSuspended, "True "+reasonSuspended)
}
