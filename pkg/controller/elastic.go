package controller

import (
	"context"
	"fmt"
	"time"

	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/metrics"
)

const (
	// conditionResizing is True while the workers move to a new count:
	// from a change of replicas, or the replacement of a failed worker,
	// until every wanted worker runs and every removed one is gone.
	conditionResizing common.JobConditionType = "Resizing"

	reasonResizing            = "MPIJobResizing"
	reasonWorkersBelowMinimum = "WorkersBelowMinimum"
	eventWorkerReplaced       = "WorkerReplaced"
)

// checkMinReplicas fails an elastic job whose running workers have been
// fewer than minReplicas for longer than minReplicasTimeoutSeconds, as
// clock tells.
func (c *MPIJobController) checkMinReplicas(job *kubeflow.MPIJob, clock elastic.MinReplicasClock, now metav1.Time) bool {
	if !clock.Expired() {
		return false
	}
	ep := job.Spec.ElasticPolicy
	msg := fmt.Sprintf("MPIJob %s/%s has had %d running worker(s), fewer than minReplicas %d, for longer than minReplicasTimeoutSeconds (%ds).",
		job.Namespace, job.Name, clock.Running, *ep.MinReplicas, *ep.MinReplicasTimeoutSeconds)
	c.failJob(job, reasonWorkersBelowMinimum, msg, now)
	return true
}

// minReplicasClock is where a job stands against its minReplicas: the clock
// runs only for an elastic job, and only after the job first ran.
func minReplicasClock(job *kubeflow.MPIJob, ws []elastic.Worker, recorded elastic.State, now time.Time) elastic.MinReplicasClock {
	ep := job.Spec.ElasticPolicy
	if ep == nil {
		return elastic.MinReplicasClock{}
	}
	timeout := time.Duration(*ep.MinReplicasTimeoutSeconds) * time.Second
	started := hasCondition(&job.Status, common.JobRunning)
	return elastic.TrackMinReplicas(int(*ep.MinReplicas), timeout, started, ws, recorded.BelowMinSince, now)
}

// markReplaced records, on each failed worker of an elastic job not handled
// yet, which new worker replaces it ("none" when the job needs no
// replacement), so that each failure is reported once.
func (c *MPIJobController) markReplaced(ctx context.Context, job *kubeflow.MPIJob, ws []elastic.Worker, created []int) error {
	if job.Spec.ElasticPolicy == nil {
		return nil
	}
	for _, r := range elastic.Replacements(ws, created, workerNamer(job)) {
		patched, err := c.pods.Annotate(ctx, owner(job), r.Failed, elastic.AnnotationReplacedBy, r.By)
		if err != nil {
			return fmt.Errorf("marking failed worker %s: %w", r.Failed.Name, err)
		}
		if patched != nil {
			c.reportReplaced(job, r)
		}
	}
	return nil
}

// reportReplaced tells of a failed worker and its replacement.
func (c *MPIJobController) reportReplaced(job *kubeflow.MPIJob, r elastic.Replacement) {
	why := r.Failed.Status.Reason
	if why == "" {
		why = "Failed"
	}
	if r.By == elastic.ReplacedByNone {
		c.recorder.Eventf(job, corev1.EventTypeWarning, eventWorkerReplaced,
			"Worker %s failed (%s) and left discover_hosts.sh; the job has its workers without a replacement", r.Failed.Name, why)
		return
	}
	c.recorder.Eventf(job, corev1.EventTypeWarning, eventWorkerReplaced,
		"Worker %s failed (%s) and left discover_hosts.sh; %s replaces it", r.Failed.Name, why, r.By)
	metrics.WorkersReplaced.Inc()
}

// updateResizing keeps the Resizing condition of a running elastic job:
// True while the plan changes the workers or they have not settled yet,
// absent otherwise. A job without an elastic policy shows the upstream
// operator's conditions only: a failed worker of such a job is not
// replaced, so it would never settle.
func updateResizing(job *kubeflow.MPIJob, ws []elastic.Worker, plan elastic.Plan, now metav1.Time) {
	if job.Spec.ElasticPolicy == nil || !hasCondition(&job.Status, common.JobRunning) || elastic.Settled(workerSpec(job), ws, plan) {
		removeCondition(&job.Status, conditionResizing)
		return
	}
	setCondition(&job.Status, conditionResizing, reasonResizing,
		fmt.Sprintf("MPIJob %s/%s is resizing to %d worker(s).", job.Namespace, job.Name, desiredWorkers(job)), now)
}

// removeCondition drops every condition of type t.
func removeCondition(status *common.JobStatus, t common.JobConditionType) {
	kept := status.Conditions[:0]
	for _, c := range status.Conditions {
		if c.Type != t {
			kept = append(kept, c)
		}
	}
	status.Conditions = kept
}
