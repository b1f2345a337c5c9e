package controller

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow/mpi-operator/pkg/reconcile"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// Condition reasons. The MPIJob* ones are the upstream operator's: Kueue,
// Kubeflow Pipelines and the SDKs read them.
const (
	reasonSuspended = "MPIJobSuspended"
	reasonResumed   = "MPIJobResumed"
)

// setCondition records a condition of type t with status s. The rules are
// those of Kubeflow's job conditions, which clients rely on:
//   - Running and Restarting exclude each other: setting one drops the
//     other (the operator never sets Restarting, as the upstream operator
//     did not, but a job may hold one an older operator set);
//   - once a job has Succeeded or Failed, its Running condition is False;
//   - a condition that already has status s keeps its place and its
//     lastTransitionTime, and takes the new reason and message.
//
// It reports whether anything changed.
func setCondition(status *v2beta1.JobStatus, t v2beta1.JobConditionType, s corev1.ConditionStatus, reason, message string, now metav1.Time) bool {
	if cur := conditions.Find(status.Conditions, t); cur != nil && cur.Status == s {
		if cur.Reason == reason && cur.Message == message {
			return false
		}
		cur.Reason, cur.Message, cur.LastUpdateTime = reason, message, now
		return true
	}
	finishing := s == corev1.ConditionTrue && (t == v2beta1.JobSucceeded || t == v2beta1.JobFailed)
	kept := status.Conditions[:0]
	for _, c := range status.Conditions {
		if c.Type == t || s == corev1.ConditionTrue && excludes(t, c.Type) {
			continue
		}
		if finishing && c.Type == v2beta1.JobRunning && c.Status == corev1.ConditionTrue {
			c.Status, c.LastUpdateTime, c.LastTransitionTime = corev1.ConditionFalse, now, now
		}
		kept = append(kept, c)
	}
	status.Conditions = append(kept, v2beta1.JobCondition{
		Type:               t,
		Status:             s,
		Reason:             reason,
		Message:            message,
		LastUpdateTime:     now,
		LastTransitionTime: now,
	})
	return true
}

// excludes tells whether a True condition of type t drops one of type o.
func excludes(t, o v2beta1.JobConditionType) bool {
	return t == v2beta1.JobRunning && o == v2beta1.JobRestarting ||
		t == v2beta1.JobRestarting && o == v2beta1.JobRunning
}

// conditions are the v2beta1 API's job conditions.
var conditions = reconcile.Conditions[v2beta1.JobCondition, v2beta1.JobConditionType]{
	Type:      func(c *v2beta1.JobCondition) v2beta1.JobConditionType { return c.Type },
	Status:    func(c *v2beta1.JobCondition) corev1.ConditionStatus { return c.Status },
	Succeeded: v2beta1.JobSucceeded, Failed: v2beta1.JobFailed,
}
