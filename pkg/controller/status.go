package controller

import (
	"context"
	"fmt"
	"time"

	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/metrics"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// Condition reasons and event reasons. The MPIJob* condition reasons are the
// upstream operator's; Kubeflow Pipelines and the SDKs read them.
const (
	reasonRestarting           = "MPIJobRestarting"
	reasonDeadlineExceeded     = "DeadlineExceeded"
	reasonBackoffLimitExceeded = "BackoffLimitExceeded"
	reasonInvalidSpec          = "InvalidMPIJobSpec"

	eventErrResourceExists = reconcile.ReasonResourceExists
	eventTTLExpired        = "TTLExpired"
)

// setCondition records a condition of type t as True, following the
// kubeflow rules: Running and Restarting exclude each other, and a finished
// job's Running condition turns False. A condition that is True already
// keeps its place and lastTransitionTime and takes the new reason and
// message. It reports whether anything changed.
func setCondition(status *common.JobStatus, t common.JobConditionType, reason, message string, now metav1.Time) bool {
	if cur := conditions.Find(status.Conditions, t); cur != nil && cur.Status == corev1.ConditionTrue {
		if cur.Reason == reason && cur.Message == message {
			return false
		}
		cur.Reason, cur.Message, cur.LastUpdateTime = reason, message, now
		return true
	}
	kept := status.Conditions[:0]
	for _, c := range status.Conditions {
		switch {
		case c.Type == t:
			continue
		case (t == common.JobSucceeded || t == common.JobFailed) && c.Type == conditionResizing:
			continue
		case t == common.JobRunning && c.Type == common.JobRestarting,
			t == common.JobRestarting && c.Type == common.JobRunning:
			continue
		case (t == common.JobSucceeded || t == common.JobFailed) && c.Type == common.JobRunning && c.Status == corev1.ConditionTrue:
			c.Status = corev1.ConditionFalse
			c.LastUpdateTime = now
			c.LastTransitionTime = now
		}
		kept = append(kept, c)
	}
	status.Conditions = append(kept, common.JobCondition{
		Type:               t,
		Status:             corev1.ConditionTrue,
		Reason:             reason,
		Message:            message,
		LastUpdateTime:     now,
		LastTransitionTime: now,
	})
	return true
}

// conditions are the v1 API's job conditions.
var conditions = reconcile.Conditions[common.JobCondition, common.JobConditionType]{
	Type:      func(c *common.JobCondition) common.JobConditionType { return c.Type },
	Status:    func(c *common.JobCondition) corev1.ConditionStatus { return c.Status },
	Succeeded: common.JobSucceeded, Failed: common.JobFailed,
}

// initStatus makes sure the fields the API requires are present.
func initStatus(status *common.JobStatus) {
	if status.Conditions == nil {
		status.Conditions = []common.JobCondition{}
	}
	if status.ReplicaStatuses == nil {
		status.ReplicaStatuses = map[common.ReplicaType]*common.ReplicaStatus{}
	}
}

// replicaStatus returns the status of one replica type, created if missing.
func replicaStatus(status *common.JobStatus, rt common.ReplicaType) *common.ReplicaStatus {
	initStatus(status)
	rs := status.ReplicaStatuses[rt]
	if rs == nil {
		rs = &common.ReplicaStatus{}
		status.ReplicaStatuses[rt] = rs
	}
	return rs
}

// countWorkers fills the Worker replica status from every worker pod of the
// job, whatever its index.
func countWorkers(job *kubeflow.MPIJob, workers []*corev1.Pod) {
	rs := replicaStatus(&job.Status, kubeflow.MPIReplicaTypeWorker)
	rs.Selector = workerSelector(job).String()
	rs.Active, rs.Succeeded, rs.Failed = reconcile.CountPhases(workers)
}

// countLauncher fills the Launcher replica status. Failed is not derived
// from the pod: it counts every launcher pod that failed, restarted ones
// included, and only checkLauncherOutcome raises it.
func countLauncher(job *kubeflow.MPIJob, launcher *corev1.Pod) {
	rs := replicaStatus(&job.Status, kubeflow.MPIReplicaTypeLauncher)
	rs.Active, rs.Succeeded = 0, 0
	if launcher == nil {
		return
	}
	switch launcher.Status.Phase {
	case corev1.PodRunning:
		if launcher.DeletionTimestamp == nil {
			rs.Active = 1
		}
	case corev1.PodSucceeded:
		rs.Succeeded = 1
	}
}

// writeStatus sends the job's status to the API server if it differs from
// what the informer saw, in one request through the status subresource. A
// change of the replica counts or the Resizing condition alone waits up to
// engine.StatusBatchPeriod; it returns how long until it is due.
func (c *MPIJobController) writeStatus(ctx context.Context, old *common.JobStatus, job *kubeflow.MPIJob) (time.Duration, error) {
	initStatus(&job.Status)
	return c.StatusHold.Write(jobKey(job), c.Clock.Now(), old, &job.Status,
		func() error { return c.updateStatus(ctx, old, job) })
}

// updateStatus writes the job's status through the status subresource and
// announces what changed.
func (c *MPIJobController) updateStatus(ctx context.Context, old *common.JobStatus, job *kubeflow.MPIJob) error {
	now := metav1.NewTime(c.Clock.Now())
	job.Status.LastReconcileTime = &now
	base := job.ResourceVersion
	_, err := c.mpiClient.KubeflowV1().MPIJobs(job.Namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		// Deleted meanwhile, by its TTL or by a user.
		return nil
	}
	if err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	klog.FromContext(ctx).V(4).Info("Updated status", "conditions", len(job.Status.Conditions))
	c.StatusWrites.Wrote(jobKey(job), base)
	c.announce(job, old)
	return nil
}

// announce emits an event, and counts the job in the metrics, for every
// condition that the status just written holds True and the one before did
// not hold (or held with another reason or message). Deriving them from
// the written status means a sync whose write failed, and is retried,
// announces nothing twice.
func (c *MPIJobController) announce(job *kubeflow.MPIJob, old *common.JobStatus) {
	for _, cond := range job.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			continue
		}
		if prev := conditions.Find(old.Conditions, cond.Type); prev != nil && prev.Status == corev1.ConditionTrue &&
			prev.Reason == cond.Reason && prev.Message == cond.Message {
			continue
		}
		switch cond.Type {
		case common.JobCreated:
			c.Recorder.Event(job, corev1.EventTypeNormal, cond.Reason, cond.Message)
			metrics.JobsCreated.Inc()
		case common.JobRunning:
			c.Recorder.Event(job, corev1.EventTypeNormal, cond.Reason, cond.Message)
		case common.JobSucceeded:
			c.Recorder.Event(job, corev1.EventTypeNormal, cond.Reason, cond.Message)
			metrics.JobsSuccessful.Inc()
		case common.JobFailed:
			c.Recorder.Event(job, corev1.EventTypeWarning, cond.Reason, cond.Message)
			metrics.JobsFailed.Inc()
		case common.JobRestarting, conditionBlocked:
			c.Recorder.Event(job, corev1.EventTypeWarning, cond.Reason, cond.Message)
		}
	}
}
