package controller

import (
	"fmt"
	"time"

	common "github.com/kubeflow/common/pkg/apis/common/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/engine"
)

const (
	// conditionResizing is True while the workers move to a new count:
	// from a change of replicas, or the replacement of a failed worker,
	// until every wanted worker runs and every removed one is gone.
	conditionResizing common.JobConditionType = engine.ConditionResizing

	reasonResizing            = "MPIJobResizing"
	reasonWorkersBelowMinimum = "WorkersBelowMinimum"
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
	started := conditions.Has(job.Status.Conditions, common.JobRunning)
	return elastic.TrackMinReplicas(int(*ep.MinReplicas), timeout, started, ws, recorded.BelowMinSince, now)
}

// updateResizing keeps the Resizing condition of a running elastic job:
// True while the plan changes the workers or they have not settled yet,
// absent otherwise. A job without an elastic policy shows the upstream
// operator's conditions only: a failed worker of such a job is not
// replaced, so it would never settle.
func updateResizing(job *kubeflow.MPIJob, ws []elastic.Worker, plan elastic.Plan, now metav1.Time) {
	if job.Spec.ElasticPolicy == nil || !conditions.Has(job.Status.Conditions, common.JobRunning) || elastic.Settled(workerSpec(job), ws, plan) {
		removeCondition(&job.Status, conditionResizing)
		return
	}
	setCondition(&job.Status, conditionResizing, reasonResizing,
		fmt.Sprintf("MPIJob %s/%s is resizing to %d worker(s).", job.Namespace, job.Name, desiredWorkers(job)), now)
}

// removeCondition drops every condition of type t.
func removeCondition(status *common.JobStatus, t common.JobConditionType) {
	status.Conditions = conditions.Remove(status.Conditions, t)
}
