package controller

import (
	"cmp"
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/engine"
	"github.com/kubeflow/mpi-operator/pkg/metrics"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// createsPerSync bounds the workers one sync creates, so that a job with
// many workers to create does not hold a queue worker while other jobs
// wait; the pod events of those created bring the job back for the rest.
const createsPerSync = 32

// eventWorkerReplaced is the reason of the event of a failed worker
// replaced; the scale events are the engine's.
const eventWorkerReplaced = "WorkerReplaced"

// workerOutcome is what the workers' step tells the steps after it.
type workerOutcome struct {
	workers []elastic.Worker
	spec    elastic.Spec
	plan    elastic.Plan
	// files is the job's ConfigMap as this sync wrote or found it; nil
	// when it does not exist yet.
	files *corev1.ConfigMap
	// settled is true when the cache showed every pod write of the
	// controller's for the job, so the plan was carried out in full.
	settled bool
	requeue time.Duration
}

// workerSpec is what the planner needs to know of the job. A Running
// worker is listed only once its name resolves.
func workerSpec(job *v2beta1.MPIJob, names resolvable) elastic.Spec {
	return elastic.Spec{
		Elastic:     job.Spec.ElasticPolicy != nil,
		Replicas:    int(workerReplicas(job)),
		DrainPeriod: drainPeriod(job),
		WorkerName:  func(i int) string { return workerName(job, i) },
		Listable:    names.listable,
	}
}

// syncWorkers plans the workers and acts on the plan in the order package
// elastic prescribes: the files with the bookkeeping, then creations, then
// deletions, and last the drain marks of the victims the written files no
// longer list. While the cache does not show the controller's own last pod
// writes, the plan's pod writes wait, and while it does not show a drain
// mark or deletion, so do the files.
func (c *MPIJobController) syncWorkers(ctx context.Context, job *v2beta1.MPIJob, pods []*corev1.Pod, now metav1.Time) (workerOutcome, error) {
	key := jobKey(job)
	out := workerOutcome{
		workers: elastic.ParseWorkers(pods, func(p *corev1.Pod) (int, bool) { return workerIndex(job, p) }),
		spec:    workerSpec(job, c.resolvableWorkers(job, pods)),
		files:   c.cachedConfigMap(job),
	}
	var recorded elastic.State
	if out.files != nil {
		recorded = elastic.ParseState(out.files.Annotations)
	}
	out.plan = elastic.PlanWorkers(out.spec, out.workers, recorded.NextIndex, c.holderOf(job), now.Time)
	clock := minReplicasClock(job, out.workers, recorded, now.Time)
	if clock.Expired() {
		ep := job.Spec.ElasticPolicy
		failJob(job, reasonWorkersBelowMinimum, fmt.Sprintf(
			"MPIJob %s/%s has had %d running worker(s), fewer than minReplicas %d, for longer than minReplicasTimeoutSeconds (%ds).",
			job.Namespace, job.Name, clock.Running, *ep.MinReplicas, *ep.MinReplicasTimeoutSeconds), now)
		return out, nil
	}
	out.requeue = elastic.Sooner(out.plan.Requeue, clock.Left)
	out.settled = c.expectations.Satisfied(key)
	changing := c.expectations.Changing(key)
	plan := out.plan
	if !out.settled {
		// The plan may repeat writes the cache does not show yet; the pod
		// event that shows them brings the job back, or the wait expires.
		plan.Create, plan.Drain, plan.Remove = nil, nil, nil
		out.requeue = elastic.Sooner(out.requeue, reconcile.ExpectationsTimeout)
	}
	planned := plan.Create
	plan.Create = plan.Create[:min(len(plan.Create), createsPerSync)]

	if !changing {
		state := elastic.State{NextIndex: plan.NextIndex, BelowMinSince: clock.Since}
		want := newConfigMap(job, plan.Hosts.Desired, plan.Hosts.Running, subdomains(job, pods), c.cfg.ClusterDomain, state.Annotations())
		files, err := reconcile.Ensure(ctx, owner(job), c.configMapChild(), want)
		if err != nil {
			return out, err
		}
		out.files = files
	}
	created, err := c.createWorkers(ctx, job, plan.Create, planned)
	if err != nil {
		return out, err
	}
	if err := c.deleteWorkers(ctx, job, plan.Remove); err != nil {
		return out, err
	}
	// The files no longer list the victims: their drain starts now
	// (engine.Unlisted).
	if out.files != nil {
		if err := c.markDraining(ctx, job, engine.Unlisted(plan.Drain, out.files.Data[discoverHostsKey]), now); err != nil {
			return out, err
		}
	}
	if out.settled {
		return out, c.markReplaced(ctx, job, out.workers, created)
	}
	return out, nil
}

// cachedConfigMap is the job's ConfigMap as the cache has it; nil when it
// has none of the job's.
func (c *MPIJobController) cachedConfigMap(job *v2beta1.MPIJob) *corev1.ConfigMap {
	cm, err := c.configMaps.ConfigMaps(job.Namespace).Get(configMapName(job))
	if err != nil || !metav1.IsControlledBy(cm, job) {
		return nil
	}
	return cm
}

// drainPeriod is how long a victim stays after it left discover_hosts.sh.
func drainPeriod(job *v2beta1.MPIJob) time.Duration {
	drain := v2beta1.DefaultDrainSeconds
	if ep := job.Spec.ElasticPolicy; ep != nil {
		drain = *ep.DrainSeconds
	}
	return time.Duration(drain) * time.Second
}

// minReplicasClock is where an elastic job stands against its minReplicas;
// the clock runs only once the job has run.
func minReplicasClock(job *v2beta1.MPIJob, ws []elastic.Worker, recorded elastic.State, now time.Time) elastic.MinReplicasClock {
	if ep := job.Spec.ElasticPolicy; ep != nil {
		return elastic.TrackMinReplicas(int(*ep.MinReplicas), time.Duration(*ep.MinReplicasTimeoutSeconds)*time.Second,
			hasCondition(&job.Status, v2beta1.JobRunning), ws, recorded.BelowMinSince, now)
	}
	return elastic.MinReplicasClock{}
}

// createWorkers creates the workers of the given indices, of the planned
// ones (all the step creates), in batches that start at one pod and double,
// as the Job controller's do, and returns the indices created.
func (c *MPIJobController) createWorkers(ctx context.Context, job *v2beta1.MPIJob, indices, planned []int) ([]int, error) {
	done, err := reconcile.InBatches(len(indices), 1, func(i int) error {
		_, err := c.pods.Create(ctx, owner(job), newWorker(job, indices[i], c.gang, c.cfg.ClusterDomain))
		return err
	})
	created := make([]int, len(done))
	for i, d := range done {
		created[i] = indices[d]
	}
	if len(created) > 0 {
		klog.FromContext(ctx).V(2).Info("Created workers", "indices", created)
		if e, first := c.scaleSteps.Created(jobKey(job), job.UID, job.Generation, int(workerReplicas(job)),
			workerNames(job, planned)); first {
			c.recorder.Event(job, corev1.EventTypeNormal, e.Reason, e.Message)
			metrics.WorkerResizes.WithLabelValues("up").Inc()
		}
	}
	return created, err
}

// markDraining takes workers out of discover_hosts.sh for good: the mark is
// on the pod itself, so that it outlives a restart of the controller.
func (c *MPIJobController) markDraining(ctx context.Context, job *v2beta1.MPIJob, pods []*corev1.Pod, now metav1.Time) error {
	since := now.UTC().Format(time.RFC3339Nano)
	marked, err := c.onPods(pods, func(p *corev1.Pod) error {
		_, err := c.pods.Annotate(ctx, owner(job), p, elastic.AnnotationDrainingSince, since)
		return err
	})
	if names := podNames(marked); len(names) > 0 {
		klog.FromContext(ctx).V(2).Info("Draining workers", "pods", names)
		e := engine.Draining(int(workerReplicas(job)), names, drainPeriod(job))
		c.recorder.Event(job, corev1.EventTypeNormal, e.Reason, e.Message)
	}
	return err
}

// deleteWorkers deletes workers that discover_hosts.sh no longer lists.
func (c *MPIJobController) deleteWorkers(ctx context.Context, job *v2beta1.MPIJob, pods []*corev1.Pod) error {
	deleted, err := c.onPods(pods, func(p *corev1.Pod) error { return c.pods.Delete(ctx, owner(job), p) })
	if len(deleted) > 0 {
		klog.FromContext(ctx).V(2).Info("Deleted workers", "pods", podNames(deleted))
		metrics.WorkerResizes.WithLabelValues("down").Inc()
	}
	if e, ok := engine.Deleted(deleted); ok {
		c.recorder.Event(job, corev1.EventTypeNormal, e.Reason, e.Message)
	}
	return err
}

// onPods calls write for each pod, in parallel batches of the largest size,
// and returns the pods it succeeded for.
func (c *MPIJobController) onPods(pods []*corev1.Pod, write func(*corev1.Pod) error) ([]*corev1.Pod, error) {
	done, err := reconcile.InBatches(len(pods), reconcile.MaxBatch, func(i int) error { return write(pods[i]) })
	out := make([]*corev1.Pod, len(done))
	for i, d := range done {
		out[i] = pods[d]
	}
	return out, err
}

func podNames(pods []*corev1.Pod) []string {
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = p.Name
	}
	return names
}

// stopWorkers deletes the given workers of a job that stops using them
// (suspended or finished): discover_hosts.sh is emptied first, so that none
// of them is deleted while it is listed.
// It returns how long to wait for the cache when it does not show the
// controller's last pod writes yet, and so leaves the pods alone.
func (c *MPIJobController) stopWorkers(ctx context.Context, job *v2beta1.MPIJob, pods []*corev1.Pod) (time.Duration, error) {
	if len(pods) == 0 {
		return 0, nil
	}
	if !c.expectations.Satisfied(jobKey(job)) {
		// Their events bring the job back, or the wait expires.
		return reconcile.ExpectationsTimeout, nil
	}
	if err := c.emptyDiscovery(ctx, job); err != nil {
		return 0, err
	}
	return 0, c.deleteWorkers(ctx, job, pods)
}

// emptyDiscovery writes a discover_hosts.sh that lists no worker; the
// hostfile and the bookkeeping stay. A job without a ConfigMap lists
// nobody already.
func (c *MPIJobController) emptyDiscovery(ctx context.Context, job *v2beta1.MPIJob) error {
	cm := c.cachedConfigMap(job)
	if cm == nil {
		return nil
	}
	empty := discoverHostsScript(hostNames{job: job, clusterDomain: c.cfg.ClusterDomain}.of(nil))
	if cm.Data[discoverHostsKey] == empty {
		return nil
	}
	want := cm.DeepCopy()
	if want.Data == nil {
		want.Data = map[string]string{}
	}
	want.Data[discoverHostsKey] = empty
	_, err := reconcile.Ensure(ctx, owner(job), c.configMapChild(), want)
	return err
}

// markReplaced records, on each failed worker of an elastic job not handled
// yet, which new worker replaces it ("none" when the job needs no
// replacement), so that each failure is reported once.
func (c *MPIJobController) markReplaced(ctx context.Context, job *v2beta1.MPIJob, ws []elastic.Worker, created []int) error {
	if job.Spec.ElasticPolicy == nil {
		return nil
	}
	for _, r := range elastic.Replacements(ws, created, func(i int) string { return workerName(job, i) }) {
		if _, err := c.pods.Annotate(ctx, owner(job), r.Failed, elastic.AnnotationReplacedBy, r.By); err != nil {
			return fmt.Errorf("marking failed worker %s: %w", r.Failed.Name, err)
		}
		c.reportReplacement(job, r)
	}
	return nil
}

// reportReplacement tells of a failed worker and what took its place.
func (c *MPIJobController) reportReplacement(job *v2beta1.MPIJob, r elastic.Replacement) {
	outcome := "the job has the workers it asks for without a replacement"
	if r.By != elastic.ReplacedByNone {
		outcome = "replaced by " + r.By
		metrics.WorkersReplaced.Inc()
	}
	c.recorder.Eventf(job, corev1.EventTypeWarning, eventWorkerReplaced, "Worker %s ended (%s) and is out of discover_hosts.sh; %s",
		r.Failed.Name, cmp.Or(r.Failed.Status.Reason, string(r.Failed.Status.Phase)), outcome)
}

func workerNames(job *v2beta1.MPIJob, indices []int) []string {
	names := make([]string, len(indices))
	for i, idx := range indices {
		names[i] = workerName(job, idx)
	}
	return names
}
