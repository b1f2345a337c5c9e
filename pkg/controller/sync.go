package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/engine"
	"github.com/kubeflow/mpi-operator/pkg/metrics"
	"github.com/kubeflow/mpi-operator/pkg/podcache"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// syncHandler brings one MPIJob's children and status in line with its
// spec. Everything it decides is derived from the cluster as the informers
// see it, so a restarted controller carries on where the last one stopped.
// It returns how long to wait before the job needs another look, if it does.
// The queue runs one sync of a job at a time.
func (c *MPIJobController) syncHandler(ctx context.Context, key string) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		logger.Error(err, "Dropping malformed key")
		return 0, nil
	}
	shared, err := c.jobLister.MPIJobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.forget(key, ns, name)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	now := metav1.NewTime(c.Clock.Now())
	obs, exit, err := c.checkJob(shared, now)
	switch exit {
	case exitDeleted:
		return 0, nil
	case exitForeign:
		c.warnForeignJob(shared)
		return 0, nil
	}
	job := obs.job
	var requeue time.Duration
	if err == nil {
		requeue, err = c.reconcile(ctx, obs, exit, now)
	}
	updateBlocked(&job.Status, err, now)
	return c.EndSync(key, shared.ResourceVersion, requeue, err, func() (time.Duration, error) {
		return c.writeStatus(ctx, &shared.Status, job)
	})
}

// forget drops what the controller remembers of a deleted job.
func (c *MPIJobController) forget(key, ns, name string) {
	metrics.JobInfo.DeleteLabelValues(name+launcherSuffix, ns)
	c.memory.Forget(key)
}

// reconcile acts on a job that checkJob let through, or winds a finished
// one down, and records the outcome in its status, which the caller
// writes.
func (c *MPIJobController) reconcile(ctx context.Context, obs *observed, exit earlyExit, now metav1.Time) (time.Duration, error) {
	switch exit {
	case exitNone:
		return c.reconcileActive(ctx, obs, now)
	case exitWindDown:
		return c.reconcileFinished(ctx, obs, now)
	}
	return 0, nil
}

// reconcileActive runs a job that checkJob let through: the engine's steps
// (the files, the launcher's RBAC objects and PodGroup, the launcher told,
// the drain marks, the workers created and deleted), the launcher once its
// hosts are in place, then the conditions of a running job.
func (c *MPIJobController) reconcileActive(ctx context.Context, obs *observed, now metav1.Time) (time.Duration, error) {
	job, launcher, ws := obs.job, obs.launcher, obs.workers
	if obs.restartRecorded {
		// The failure is counted in the status the cache shows: the pod
		// may go, and a later sync creates the next launcher.
		if err := c.Pods.Delete(ctx, owner(job), launcher); err != nil {
			return 0, err
		}
	}
	if err := c.Engine.Adopt(ctx, engineJob(job, now.Time), c.jobPods(job, launcher, ws), jobPodLabels(job)); err != nil {
		return 0, err
	}
	plan := elastic.PlanWorkers(c.planSpec(job, obs.listed), ws, obs.recorded.NextIndex, c.holders.Of(job, workerNamer(job)), now.Time)
	h := c.hooks(job, &launcher, obs.belowMin.Since)
	h.Beside = []func(context.Context, elastic.Plan, bool) error{
		func(ctx context.Context, plan elastic.Plan, settled bool) error {
			if !settled {
				// Exec named from a cache that shows only some of the
				// deletions of a shrink would be trimmed once per
				// deletion seen; no worker is created meanwhile.
				return nil
			}
			return c.syncLauncherRBAC(ctx, job, plan.Exec)
		},
		func(ctx context.Context, _ elastic.Plan, _ bool) error { return c.syncPodGroup(ctx, job) },
	}
	ej := engineJob(job, now.Time)
	ej.Seen = obs.seen
	acted, err := c.Engine.Act(ctx, ej, ws, plan, h)
	// Workers planned despite an error (the names that pods of someone
	// else's hold block the others only) are created; the launcher waits.
	if err != nil || acted.GaveWay {
		return 0, err
	}
	if acted.Settled && acted.Written && launcher == nil && len(plan.InTheWay) == 0 {
		// A launcher would start the ranks with a host that is not the
		// job's: it waits until no worker name is held.
		if err := c.createLauncher(ctx, job, elastic.HostsHash(acted.Script)); err != nil {
			return 0, err
		}
	}
	c.updateRunning(job, launcher, ws, now)
	updateResizing(job, ws, plan, now)
	deadline, _ := deadlineLeft(job, now)
	return elastic.Sooner(elastic.Sooner(acted.Requeue, obs.belowMin.Left), deadline),
		errors.Join(reconcile.ForeignPods(owner(job), plan.Blocked), engine.AtBound(jobKey(job), plan, c.maxWorkerPods()))
}

// checkSpec validates the job. A job that has not started fails with an
// invalid spec, as the upstream operator failed it. One that has started
// (its spec was edited, or a newer controller checks more than the one that
// accepted it) is held instead: its pods and files stay as they are, and it
// is Blocked until its spec is valid again, since failing it would stop a
// training run over an edit. The API server refuses such edits where the
// CRD can see them; this covers the rest and older CRDs.
func (c *MPIJobController) checkSpec(job *kubeflow.MPIJob, now metav1.Time) error {
	errs := validateJob(job)
	started := conditions.Find(job.Status.Conditions, common.JobCreated) != nil
	switch {
	case len(errs) == 0 && !started:
		msg := fmt.Sprintf("MPIJob %s/%s is created.", job.Namespace, job.Name)
		setCondition(&job.Status, common.JobCreated, reconcile.ReasonCreated, msg, now)
	case len(errs) > 0 && !started:
		c.failJob(job, reasonInvalidSpec, fmt.Sprintf("MPIJob %s/%s is invalid: %v", job.Namespace, job.Name, errs.ToAggregate()), now)
	case len(errs) > 0:
		return &reconcile.SpecError{Reason: reasonInvalidSpec, Job: jobKey(job), Errs: errs}
	}
	return nil
}

// getLauncher returns the job's launcher pod, or nil when there is none.
func (c *MPIJobController) getLauncher(job *kubeflow.MPIJob) (*corev1.Pod, error) {
	pod, err := c.podLister.Pods(job.Namespace).Get(launcherName(job))
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !metav1.IsControlledBy(pod, job) {
		return nil, reconcile.NewForeignError(owner(job), "Pod", pod.Name)
	}
	return pod, nil
}

// getWorkers returns every worker pod the job controls. It reads the pods
// the job controls from an index by the job's UID, not the whole namespace:
// a sync costs the same whatever else runs there.
func (c *MPIJobController) getWorkers(job *kubeflow.MPIJob) ([]*corev1.Pod, error) {
	objs, err := c.podIndexer.ByIndex(reconcile.ByControllerUID, string(job.UID))
	if err != nil {
		return nil, err
	}
	out := podcache.Select(objs, workerSelector(job))
	// The lister's order is random; acting in name order keeps every sync's
	// requests in the same order.
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// failJob marks the job Failed with reason; the Warning event follows once
// the status is written. It reports whether the job was not Failed for that
// reason before.
func (c *MPIJobController) failJob(job *kubeflow.MPIJob, reason, msg string, now metav1.Time) bool {
	if !setCondition(&job.Status, common.JobFailed, reason, msg, now) {
		return false
	}
	if job.Status.CompletionTime == nil {
		job.Status.CompletionTime = &now
	}
	return true
}
