package controller

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/kubeflow/mpi-operator/pkg/engine"
	"github.com/kubeflow/mpi-operator/pkg/metrics"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// Conditions of this operator's own, besides the upstream operator's.
const (
	// conditionBlocked is True while a write the job needs is refused for a
	// reason that retrying alone does not cure (see reconcile.BlockedReason);
	// its message carries the API server's words. It goes once a sync
	// completes.
	conditionBlocked v2beta1.JobConditionType = "Blocked"
	// conditionResizing is True while an elastic job's workers move to a
	// new count, until every wanted worker runs and is listed and every
	// removed one is gone.
	conditionResizing v2beta1.JobConditionType = engine.ConditionResizing
)

// Condition reasons of this operator's own.
const (
	reasonInvalidSpec         = "InvalidMPIJobSpec"
	reasonResizing            = "MPIJobResizing"
	reasonWorkersBelowMinimum = "WorkersBelowMinimum"
)

// replicaStatus returns the status of one replica type, made if missing.
func replicaStatus(status *v2beta1.JobStatus, rt v2beta1.MPIReplicaType) *v2beta1.ReplicaStatus {
	if status.ReplicaStatuses[rt] == nil {
		if status.ReplicaStatuses == nil {
			status.ReplicaStatuses = map[v2beta1.MPIReplicaType]*v2beta1.ReplicaStatus{}
		}
		status.ReplicaStatuses[rt] = &v2beta1.ReplicaStatus{}
	}
	return status.ReplicaStatuses[rt]
}

// countWorkers fills the Worker replica status from every worker pod of
// the job, whatever its index: Running ones that are not being deleted are
// active. The selector lets the scale subresource, and so an autoscaler,
// find the workers.
func countWorkers(job *v2beta1.MPIJob, pods []*corev1.Pod) {
	rs := replicaStatus(&job.Status, v2beta1.MPIReplicaTypeWorker)
	rs.LabelSelector = &metav1.LabelSelector{MatchLabels: podLabels(job, roleWorker)}
	rs.Selector = workerSelector(job).String()
	rs.Active, rs.Succeeded, rs.Failed = reconcile.CountPhases(pods)
}

// countLauncher fills the Launcher replica status from the launcher Job's.
func countLauncher(job *v2beta1.MPIJob, launcher *batchv1.Job) {
	rs := replicaStatus(&job.Status, v2beta1.MPIReplicaTypeLauncher)
	rs.LabelSelector = &metav1.LabelSelector{MatchLabels: podLabels(job, roleLauncher)}
	rs.Selector = launcherSelector(job).String()
	rs.Active, rs.Succeeded, rs.Failed = 0, 0, 0
	if launcher != nil {
		rs.Active, rs.Succeeded, rs.Failed = launcher.Status.Active, launcher.Status.Succeeded, launcher.Status.Failed
	}
}

// finish records that the job has Succeeded or Failed, and when.
func finish(job *v2beta1.MPIJob, t v2beta1.JobConditionType, reason, msg string, now metav1.Time) {
	setCondition(&job.Status, t, corev1.ConditionTrue, reason, msg, now)
	if job.Status.CompletionTime == nil {
		job.Status.CompletionTime = &now
	}
	removeCondition(&job.Status, conditionResizing)
}

// failJob marks the job Failed; the Warning event follows once the status
// is written.
func failJob(job *v2beta1.MPIJob, reason, msg string, now metav1.Time) {
	finish(job, v2beta1.JobFailed, reason, msg, now)
}

// removeCondition drops every condition of type t.
func removeCondition(status *v2beta1.JobStatus, t v2beta1.JobConditionType) {
	status.Conditions = conditions.Remove(status.Conditions, t)
}

// updateBlocked sets or clears the Blocked condition from the outcome of a
// sync: set for an error that blocks the job, cleared once a sync went
// through, and left as it was after an error that a retry may cure.
func updateBlocked(status *v2beta1.JobStatus, err error, now metav1.Time) {
	if reason, ok := reconcile.BlockedReason(err); ok {
		setCondition(status, conditionBlocked, corev1.ConditionTrue, reason, err.Error(), now)
		return
	}
	if err == nil {
		removeCondition(status, conditionBlocked)
	}
}

// writeStatus sends the job's status to the API server if it differs from
// old, the cached one, besides lastReconcileTime, in one request through
// the status subresource. A change of the replica counts or the Resizing
// condition alone waits up to engine.StatusBatchPeriod; it returns how long
// until it is due.
func (c *MPIJobController) writeStatus(ctx context.Context, old *v2beta1.JobStatus, job *v2beta1.MPIJob) (time.Duration, error) {
	return c.StatusHold.Write(jobKey(job), c.Clock.Now(), old, &job.Status,
		func() error { return c.updateStatus(ctx, old, job) })
}

// updateStatus writes the job's status through the status subresource and
// announces what changed.
func (c *MPIJobController) updateStatus(ctx context.Context, old *v2beta1.JobStatus, job *v2beta1.MPIJob) error {
	now := metav1.NewTime(c.Clock.Now())
	job.Status.LastReconcileTime = &now
	_, err := c.mpi.KubeflowV2beta1().MPIJobs(job.Namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil // deleted meanwhile
	case err != nil:
		return fmt.Errorf("updating status: %w", err)
	}
	klog.FromContext(ctx).V(4).Info("Updated status", "conditions", len(job.Status.Conditions))
	c.StatusWrites.Wrote(jobKey(job), job.ResourceVersion)
	c.announce(job, old)
	return nil
}

// announce emits an event, and counts the job in the metrics, for each
// condition the written status holds that old did not hold with that status,
// reason and message. Deriving them from the written status means that a
// sync whose write failed, and is retried, announces nothing twice.
func (c *MPIJobController) announce(job *v2beta1.MPIJob, old *v2beta1.JobStatus) {
	for _, cond := range job.Status.Conditions {
		if prev := conditions.Find(old.Conditions, cond.Type); prev != nil && prev.Status == cond.Status &&
			prev.Reason == cond.Reason && prev.Message == cond.Message {
			continue
		}
		kind, counter := transitionEvent(cond)
		if kind == "" {
			continue
		}
		c.Recorder.Event(job, kind, cond.Reason, cond.Message)
		if counter != nil {
			counter.Inc()
		}
	}
}

// counter is the part of a Prometheus counter that announce uses.
type counter interface{ Inc() }

// transitionEvent is the event type of a condition that just took its
// status, and the metric it counts in; an empty type for none.
func transitionEvent(cond v2beta1.JobCondition) (string, counter) {
	if cond.Status != corev1.ConditionTrue {
		// Of the conditions that turn False, only a resume is news.
		if cond.Type == v2beta1.JobSuspended && cond.Reason == reasonResumed {
			return corev1.EventTypeNormal, nil
		}
		return "", nil
	}
	switch cond.Type {
	case v2beta1.JobCreated:
		return corev1.EventTypeNormal, metrics.JobsCreated
	case v2beta1.JobSucceeded:
		return corev1.EventTypeNormal, metrics.JobsSuccessful
	case v2beta1.JobFailed:
		return corev1.EventTypeWarning, metrics.JobsFailed
	case conditionBlocked:
		return corev1.EventTypeWarning, nil
	case v2beta1.JobRunning, v2beta1.JobSuspended:
		return corev1.EventTypeNormal, nil
	}
	return "", nil
}
