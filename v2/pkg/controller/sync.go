package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubeflow/mpi-operator/pkg/engine"
	"github.com/kubeflow/mpi-operator/pkg/metrics"
	"github.com/kubeflow/mpi-operator/pkg/podcache"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// syncHandler brings one MPIJob's children and status in line with its
// spec. Everything it decides is derived from the cluster as the informers
// show it, so a restarted controller carries on where the last one stopped.
// It returns how long to wait before the job needs another look, if it
// does.
func (c *MPIJobController) syncHandler(ctx context.Context, key string) (time.Duration, error) {
	ns, name, splitErr := cache.SplitMetaNamespaceKey(key)
	if splitErr != nil {
		klog.FromContext(ctx).Error(splitErr, "Dropping a malformed key")
		return 0, nil
	}
	shared, err := c.jobLister.MPIJobs(ns).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		c.forget(key, ns, name)
		return 0, nil
	case err != nil:
		return 0, err
	case shared.DeletionTimestamp != nil || !managedHere(shared):
		return 0, nil
	}
	job := shared.DeepCopy()
	job.ManagedFields = nil // what the cache kept of them is no request's business
	v2beta1.SetDefaults_MPIJob(job)
	now := metav1.NewTime(c.Clock.Now())

	requeue, err := c.reconcile(ctx, job, now)
	updateBlocked(&job.Status, err, now)
	return c.EndSync(key, shared.ResourceVersion, requeue, err, func() (time.Duration, error) {
		return c.writeStatus(ctx, &shared.Status, job)
	})
}

// forget drops what the controller remembers of a deleted job.
func (c *MPIJobController) forget(key, ns, name string) {
	c.memory.Forget(key)
	metrics.JobInfo.DeleteLabelValues(name+launcherSuffix, ns)
}

// managedHere tells whether this operator reconciles the job: a job whose
// runPolicy.managedBy names another controller (Kueue's MultiKueue) is that
// controller's alone, status included.
func managedHere(job *v2beta1.MPIJob) bool {
	by := job.Spec.RunPolicy.ManagedBy
	return by == nil || *by == "" || *by == v2beta1.KubeflowJobController
}

// reconcile acts on a defaulted copy of the job and records the outcome in
// its status, which the caller writes.
func (c *MPIJobController) reconcile(ctx context.Context, job *v2beta1.MPIJob, now metav1.Time) (time.Duration, error) {
	// Whether the job's end is recorded already: the pods of a finished job
	// are wound down only once it is, so that a lost status write cannot
	// leave a job whose pods are gone and that starts them again.
	recorded := conditions.Finished(job.Status.Conditions)
	if !recorded {
		if err := c.checkSpec(job, now); err != nil {
			return 0, err
		}
	}
	// What the expectations tell goes with the pods read after it
	// (reconcile.Seen).
	seen := c.Expectations.Seen(jobKey(job))
	launcher, pods, err := c.observe(job)
	if err != nil {
		return 0, err
	}
	switch {
	case conditions.Finished(job.Status.Conditions):
		return c.reconcileFinished(ctx, job, launcher, pods, seen, recorded)
	case *job.Spec.RunPolicy.Suspend:
		return c.reconcileSuspended(ctx, job, launcher, pods, seen, now)
	}
	markResumed(job, now)
	return c.reconcileActive(ctx, job, launcher, pods, seen, now)
}

// checkSpec validates the job. A job that has not started fails with an
// invalid spec, as the upstream operator failed it. One that has started is
// held instead (a reconcile.SpecError): its pods and files stay as they
// are, and it is Blocked until its spec is valid again, since failing it
// would end a training run over an edit.
func (c *MPIJobController) checkSpec(job *v2beta1.MPIJob, now metav1.Time) error {
	errs := validateJob(job)
	started := conditions.Find(job.Status.Conditions, v2beta1.JobCreated) != nil
	switch {
	case len(errs) > 0 && started:
		return &reconcile.SpecError{Reason: reasonInvalidSpec, Job: jobKey(job), Errs: errs}
	case len(errs) > 0:
		failJob(job, reasonInvalidSpec, fmt.Sprintf("MPIJob %s/%s is invalid: %v", job.Namespace, job.Name, errs.ToAggregate()), now)
	case !started:
		setCondition(&job.Status, v2beta1.JobCreated, corev1.ConditionTrue, reconcile.ReasonCreated,
			fmt.Sprintf("MPIJob %s/%s is created.", job.Namespace, job.Name), now)
	}
	return nil
}

// reconcileActive runs a job that is neither finished nor suspended: the
// launcher's outcome first, then the children in the order they depend on
// each other, then the status.
func (c *MPIJobController) reconcileActive(ctx context.Context, job *v2beta1.MPIJob, launcher *batchv1.Job, pods []*corev1.Pod, seen reconcile.Seen, now metav1.Time) (time.Duration, error) {
	if launcherOutcome(job, launcher, now) {
		return 0, nil
	}
	if msg, evicted := engine.FixedJobEvicted(job.Spec.ElasticPolicy != nil, pods); evicted {
		failJob(job, reconcile.ReasonEvicted, msg, now)
		return 0, nil
	}
	err := reconcile.Concurrently(
		func() error { return c.syncService(ctx, job) },
		func() error { return c.syncSSHSecret(ctx, job) },
		func() error { return c.syncPodGroup(ctx, job) },
	)
	if err != nil {
		return 0, err
	}
	out, err := c.syncWorkers(ctx, job, launcher, pods, seen, now)
	if err != nil || out.gaveWay || conditions.Finished(job.Status.Conditions) {
		return 0, err
	}
	launcher, err = c.syncLauncher(ctx, job, launcher, out)
	if err != nil {
		return 0, err
	}
	c.updateProgress(job, launcher, out, now)
	return out.requeue, errors.Join(reconcile.ForeignPods(owner(job), out.plan.Blocked),
		engine.AtBound(jobKey(job), out.plan, c.maxWorkerPods()))
}

// observe reads the job's launcher Job and workers from the caches, and
// counts them in its status.
func (c *MPIJobController) observe(job *v2beta1.MPIJob) (*batchv1.Job, []*corev1.Pod, error) {
	launcher, launcherErr := c.getLauncherJob(job)
	pods, podsErr := c.getWorkers(job)
	countWorkers(job, pods)
	countLauncher(job, launcher)
	return launcher, pods, errors.Join(launcherErr, podsErr)
}

// getLauncherJob returns the job's launcher Job, or nil when there is none.
func (c *MPIJobController) getLauncherJob(job *v2beta1.MPIJob) (*batchv1.Job, error) {
	lj, err := c.launchers.Get(job.Namespace, launcherName(job))
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	case metav1.IsControlledBy(lj, job):
		return lj, nil
	default:
		return nil, reconcile.NewForeignError(owner(job), "Job", lj.Name)
	}
}

// getWorkers returns the job's worker pods in name order, from the index of
// pods by their controller: a sync costs the same whatever else runs in
// the namespace.
func (c *MPIJobController) getWorkers(job *v2beta1.MPIJob) ([]*corev1.Pod, error) {
	pods, err := c.podsOf(job.UID, workerSelector(job))
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods, err
}

// podsOf returns the cached pods whose controller has uid and whose labels
// selector matches.
func (c *MPIJobController) podsOf(uid types.UID, selector labels.Selector) ([]*corev1.Pod, error) {
	objs, err := c.podIndexer.ByIndex(reconcile.ByControllerUID, string(uid))
	if err != nil {
		return nil, err
	}
	return podcache.Select(objs, selector), nil
}

// launcherOutcome records the end of the launcher Job as the job's:
// success, or failure with the Job's reason (BackoffLimitExceeded,
// DeadlineExceeded, PodFailurePolicy, ...). It reports whether the job has
// finished.
func launcherOutcome(job *v2beta1.MPIJob, launcher *batchv1.Job, now metav1.Time) bool {
	if launcher == nil {
		return false
	}
	cond, succeeded := launcherEnd(launcher)
	switch {
	case cond == nil:
		return false
	case succeeded:
		finish(job, v2beta1.JobSucceeded, reconcile.ReasonSucceeded,
			fmt.Sprintf("MPIJob %s/%s successfully completed.", job.Namespace, job.Name), now)
	default:
		reason := cond.Reason
		if reason == "" {
			reason = reconcile.ReasonFailed
		}
		msg := fmt.Sprintf("MPIJob %s/%s has failed: its launcher Job %s failed (%s)", job.Namespace, job.Name, launcher.Name, reason)
		if cond.Message != "" {
			msg += ": " + cond.Message
		}
		failJob(job, reason, msg, now)
	}
	return true
}

// launcherEnd returns the condition of the launcher Job that decides its
// outcome, and whether that is success; nil while it has none. The Job
// controller adds FailureTarget or SuccessCriteriaMet as soon as the
// outcome is decided (at the deadline, say), and Failed or Complete only
// once the launcher's pod has stopped. The outcome is the job's from the
// first: while the pod stops, no worker is listed, created or replaced.
func launcherEnd(lj *batchv1.Job) (*batchv1.JobCondition, bool) {
	for i := range lj.Status.Conditions {
		cond := &lj.Status.Conditions[i]
		if cond.Status != corev1.ConditionTrue {
			continue
		}
		switch cond.Type {
		case batchv1.JobComplete, batchv1.JobSuccessCriteriaMet:
			return cond, true
		case batchv1.JobFailed, batchv1.JobFailureTarget:
			return cond, false
		}
	}
	return nil, false
}

// reconcileFinished winds down a finished job once its end is recorded.
// Its launcher Job is suspended first if it still runs, whatever
// cleanPodPolicy says: a job the operator failed itself (its workers below
// minReplicas for too long, a fixed job's worker evicted) must not go on
// running mpirun. Then its workers go as cleanPodPolicy says: Running
// deletes the workers that have not finished, All every worker, None
// nothing. No worker goes while discover_hosts.sh lists it, and the
// PodGroup goes with the pods.
func (c *MPIJobController) reconcileFinished(ctx context.Context, job *v2beta1.MPIJob, launcher *batchv1.Job, pods []*corev1.Pod, seen reconcile.Seen, recorded bool) (time.Duration, error) {
	if !recorded {
		return 0, nil
	}
	if err := c.suspendLauncher(ctx, job, launcher); err != nil {
		return 0, err
	}
	policy := *job.Spec.RunPolicy.CleanPodPolicy
	if policy == v2beta1.CleanPodPolicyNone {
		return 0, nil
	}
	var doomed []*corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil && (policy == v2beta1.CleanPodPolicyAll || !podFinished(p)) {
			doomed = append(doomed, p)
		}
	}
	if err := c.deletePodGroup(ctx, job); err != nil {
		return 0, err
	}
	return c.stopWorkers(ctx, job, doomed, seen)
}

func podFinished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}
