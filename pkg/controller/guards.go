package controller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/engine"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// The early exits of a sync. Every sync, urgent or not, decides through
// checkJob whether it may act on a job's workers at all: a guard added here
// holds for every event that wakes a job.

// earlyExit is how a sync ends that checkJob stopped short of acting on the
// job's plan, or exitNone when nothing stopped it.
type earlyExit int

const (
	// exitNone: the job runs, and the sync acts on its plan.
	exitNone earlyExit = iota
	// exitDeleted: the job is being deleted; nothing is written, not even
	// its status.
	exitDeleted
	// exitForeign: the job was written through another API version and is
	// left alone; the main sync says so in an event.
	exitForeign
	// exitRecord: the sync records in the job's status why it stops (the
	// job's end, a spec that holds it, a name held by someone else) and
	// writes nothing else.
	exitRecord
	// exitWindDown: the job's end is recorded already; the main sync winds
	// its pods and files down.
	exitWindDown
)

func (e earlyExit) String() string {
	switch e {
	case exitNone:
		return "none"
	case exitDeleted:
		return "being deleted"
	case exitForeign:
		return "written through another API version"
	case exitRecord:
		return "ends or is held"
	case exitWindDown:
		return "finished"
	}
	return fmt.Sprintf("earlyExit(%d)", int(e))
}

// observed is what checkJob read of a job: a defaulted copy of it, whose
// status records what the early exits found, and its pods in the cache.
// The workers, the bookkeeping and the minReplicas clock are filled only
// for a job that has not finished, which the sync may act on.
type observed struct {
	job      *kubeflow.MPIJob
	launcher *corev1.Pod
	pods     []*corev1.Pod
	// seen is what the expectations told before the pods were read.
	seen     reconcile.Seen
	workers  []elastic.Worker
	recorded elastic.State
	// listed are the workers that the job's discover_hosts.sh lists.
	listed   map[string]bool
	belowMin elastic.MinReplicasClock
	// restartRecorded tells that the status the cache shows records the
	// restart of the failed launcher: the pod may go.
	restartRecorded bool
}

// checkJob takes every early exit of the sync on shared, the job as the
// cache has it. It writes nothing: what it finds goes into the status of
// the copy it returns, which only the main sync writes. An error (a spec
// that holds a started job, a child's name held by someone else, a cache
// failure) comes with exitRecord.
func (c *MPIJobController) checkJob(shared *kubeflow.MPIJob, now metav1.Time) (*observed, earlyExit, error) {
	if shared.DeletionTimestamp != nil {
		return nil, exitDeleted, nil
	}
	if _, found := foreignAPIVersion(shared); found {
		return nil, exitForeign, nil
	}
	obs := &observed{job: workingCopy(shared)}
	job := obs.job
	// Whether the job's end is recorded already: the pods of a finished job
	// are wound down only once it is, so that a lost status write cannot
	// leave a job whose pods are gone and that starts them again.
	recorded := conditions.Finished(job.Status.Conditions)
	var invalid error
	if !recorded {
		invalid = c.checkSpec(job, now)
	}
	if job.Status.StartTime == nil {
		job.Status.StartTime = &now
	}
	obs.seen = c.Expectations.Seen(jobKey(job))
	if err := c.observePods(obs); err != nil {
		return obs, exitRecord, err
	}
	switch {
	case invalid != nil:
		return obs, exitRecord, invalid
	case recorded:
		return obs, exitWindDown, nil
	case conditions.Finished(job.Status.Conditions) || c.endsNow(obs, now):
		return obs, exitRecord, nil
	}
	return obs, exitNone, nil
}

// workingCopy is the job as a sync works on it: a defaulted copy, with the
// status fields the API requires.
func workingCopy(shared *kubeflow.MPIJob) *kubeflow.MPIJob {
	job := shared.DeepCopy()
	job.ManagedFields = nil // what the cache kept of them is no request's business
	kubeflow.SetDefaults_MPIJob(job)
	initStatus(&job.Status)
	return job
}

// observePods reads the job's launcher and workers from the cache and
// counts them in its status.
func (c *MPIJobController) observePods(obs *observed) error {
	var err error
	if obs.launcher, err = c.getLauncher(obs.job); err != nil {
		return err
	}
	if obs.pods, err = c.getWorkers(obs.job); err != nil {
		return err
	}
	obs.restartRecorded = launcherRestartRecorded(obs.job, obs.launcher)
	countWorkers(obs.job, obs.pods)
	countLauncher(obs.job, obs.launcher)
	return nil
}

// endsNow takes the early exits of a job that has not finished, each of
// which records the job's end: its deadline, its launcher's outcome, an
// evicted worker of a job without an elastic policy, and too long below
// minReplicas.
func (c *MPIJobController) endsNow(obs *observed, now metav1.Time) bool {
	job := obs.job
	if c.checkDeadline(job, now) || c.checkLauncherOutcome(job, obs.launcher, now) {
		return true
	}
	if msg, evicted := engine.FixedJobEvicted(job.Spec.ElasticPolicy != nil, obs.pods); evicted {
		c.failJob(job, reconcile.ReasonEvicted, msg, now)
		return true
	}
	obs.workers = toWorkers(job, obs.pods)
	obs.recorded, obs.listed = c.recordedState(job)
	obs.belowMin = minReplicasClock(job, obs.workers, obs.recorded, now.Time)
	return c.checkMinReplicas(job, obs.belowMin, now)
}
