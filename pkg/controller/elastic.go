package controller

import (
	"context"
	"fmt"
	"time"

	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
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

// trackMinReplicas keeps the clock of an elastic job whose running workers
// are fewer than minReplicas, and fails the job once that has lasted longer
// than minReplicasTimeoutSeconds. It returns the state to record on the
// ConfigMap and how long until the job would fail.
func (c *MPIJobController) trackMinReplicas(job *kubeflow.MPIJob, ws []worker, recorded configState, nextIndex int, now metav1.Time) (configState, time.Duration) {
	state, running, left := minReplicasClock(job, ws, recorded, nextIndex, now.Time)
	if state.belowMinSince.IsZero() || left > 0 {
		return state, left
	}
	ep := job.Spec.ElasticPolicy
	msg := fmt.Sprintf("MPIJob %s/%s has had %d running worker(s), fewer than minReplicas %d, for longer than minReplicasTimeoutSeconds (%ds).",
		job.Namespace, job.Name, running, *ep.MinReplicas, *ep.MinReplicasTimeoutSeconds)
	c.failJob(job, reasonWorkersBelowMinimum, msg, now)
	return state, 0
}

// minReplicasClock returns the state to record on the ConfigMap, with the
// time since when an elastic job has run fewer than minReplicas workers (zero
// when it has enough), its running workers, and how long it may stay below
// before it fails. The clock runs only after the job first ran; before that
// the workers are still starting.
func minReplicasClock(job *kubeflow.MPIJob, ws []worker, recorded configState, nextIndex int, now time.Time) (state configState, running int, left time.Duration) {
	state = configState{nextIndex: nextIndex}
	ep := job.Spec.ElasticPolicy
	if ep == nil || !hasCondition(&job.Status, common.JobRunning) {
		return state, 0, 0
	}
	for _, w := range ws {
		if w.live() && w.running() {
			running++
		}
	}
	if int32(running) >= *ep.MinReplicas {
		return state, running, 0
	}
	state.belowMinSince = recorded.belowMinSince
	if state.belowMinSince.IsZero() {
		state.belowMinSince = now
	}
	timeout := time.Duration(*ep.MinReplicasTimeoutSeconds) * time.Second
	return state, running, max(state.belowMinSince.Add(timeout).Sub(now), 0)
}

// markReplaced records, on each failed worker of an elastic job not handled
// yet, which new worker replaces it ("none" when the job needs no
// replacement), so that each failure is reported once.
func (c *MPIJobController) markReplaced(ctx context.Context, job *kubeflow.MPIJob, ws []worker, created []int) error {
	if job.Spec.ElasticPolicy == nil {
		return nil
	}
	for _, w := range ws {
		if w.pod.Status.Phase != corev1.PodFailed || w.terminating() {
			continue
		}
		if _, done := w.pod.Annotations[annotationReplacedBy]; done {
			continue
		}
		by := "none"
		if len(created) > 0 {
			by, created = workerName(job, created[0]), created[1:]
		}
		patched, err := c.annotatePod(ctx, job, w.pod, annotationReplacedBy, by)
		if err != nil {
			return fmt.Errorf("marking failed worker %s: %w", w.pod.Name, err)
		}
		if patched == nil {
			continue
		}
		why := w.pod.Status.Reason
		if why == "" {
			why = "Failed"
		}
		if by == "none" {
			c.recorder.Eventf(job, corev1.EventTypeWarning, eventWorkerReplaced,
				"Worker %s failed (%s) and left discover_hosts.sh; the job has its workers without a replacement", w.pod.Name, why)
			continue
		}
		c.recorder.Eventf(job, corev1.EventTypeWarning, eventWorkerReplaced,
			"Worker %s failed (%s) and left discover_hosts.sh; %s replaces it", w.pod.Name, why, by)
		metrics.WorkersReplaced.Inc()
	}
	return nil
}

// updateResizing keeps the Resizing condition of a running elastic job:
// True while the plan changes the workers or they have not settled yet,
// absent otherwise. A job without an elastic policy shows the upstream
// operator's conditions only: a failed worker of such a job is not
// replaced, so it would never settle.
func updateResizing(job *kubeflow.MPIJob, ws []worker, plan workerPlan, now metav1.Time) {
	if job.Spec.ElasticPolicy == nil || !hasCondition(&job.Status, common.JobRunning) {
		removeCondition(&job.Status, conditionResizing)
		return
	}
	settled := len(plan.create) == 0 && len(plan.drain) == 0 && len(plan.remove) == 0
	live := 0
	for _, w := range ws {
		switch {
		case w.draining(), w.terminating():
			settled = false
		case w.live():
			live++
			settled = settled && w.running()
		}
	}
	settled = settled && live == desiredWorkers(job)
	if settled {
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
