package engine

import (
	"testing"
	"time"

	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStatusChange(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	cond := func(typ common.JobConditionType, status corev1.ConditionStatus) common.JobCondition {
		return common.JobCondition{Type: typ, Status: status, Reason: "R", Message: "m", LastTransitionTime: t0, LastUpdateTime: t0}
	}
	base := func() *common.JobStatus {
		return &common.JobStatus{
			Conditions: []common.JobCondition{cond(common.JobCreated, corev1.ConditionTrue), cond(common.JobRunning, corev1.ConditionTrue)},
			ReplicaStatuses: map[common.ReplicaType]*common.ReplicaStatus{
				"Launcher": {Active: 1},
				"Worker":   {Active: 2},
			},
			StartTime:         &t0,
			LastReconcileTime: &t0,
		}
	}
	for _, tc := range []struct {
		name             string
		edit             func(*common.JobStatus)
		changed, mayWait bool
	}{
		{"same", func(*common.JobStatus) {}, false, false},
		{"only lastReconcileTime", func(s *common.JobStatus) { s.LastReconcileTime = &t1 }, false, false},
		{"the conditions gone", func(s *common.JobStatus) { s.Conditions = nil }, true, false},
		{"a count", func(s *common.JobStatus) { s.ReplicaStatuses["Worker"].Active = 3 }, true, true},
		{"counts and the time", func(s *common.JobStatus) {
			s.ReplicaStatuses["Worker"].Failed = 1
			s.ReplicaStatuses["Launcher"].Active = 0
			s.LastReconcileTime = &t1
		}, true, true},
		{"Resizing comes", func(s *common.JobStatus) {
			s.Conditions = append(s.Conditions, cond(ConditionResizing, corev1.ConditionTrue))
			s.ReplicaStatuses["Worker"].Active = 1
		}, true, true},
		{"a condition's status", func(s *common.JobStatus) {
			s.Conditions[1].Status = corev1.ConditionFalse
		}, true, false},
		{"a condition and a count", func(s *common.JobStatus) {
			s.Conditions = append(s.Conditions, cond(common.JobSucceeded, corev1.ConditionTrue))
			s.ReplicaStatuses["Worker"].Active = 0
		}, true, false},
		{"the completion time", func(s *common.JobStatus) { s.CompletionTime = &t1 }, true, false},
		{"a replica type's counts gone", func(s *common.JobStatus) { delete(s.ReplicaStatuses, "Worker") }, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := base()
			tc.edit(cur)
			changed, mayWait := StatusChange(base(), cur)
			if changed != tc.changed || mayWait != tc.mayWait {
				t.Errorf("changed %v, may wait %v; want %v, %v", changed, mayWait, tc.changed, tc.mayWait)
			}
		})
	}
}

func TestStatusChangeEmptyIsMissing(t *testing.T) {
	empty := &common.JobStatus{Conditions: []common.JobCondition{}, ReplicaStatuses: map[common.ReplicaType]*common.ReplicaStatus{}}
	if changed, _ := StatusChange(&common.JobStatus{}, empty); changed {
		t.Error("empty lists and maps count as a change from missing ones")
	}
}

func TestStatusChangeOfWhatDoesNotConvert(t *testing.T) {
	if changed, mayWait := StatusChange(&common.JobStatus{}, 42); !changed || mayWait {
		t.Errorf("changed %v, may wait %v; want a change to write at once", changed, mayWait)
	}
}
