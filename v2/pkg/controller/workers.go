package controller

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/engine"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

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
	// gaveWay is true when the engine stopped after the files for the
	// sync of an urgent change (engine.Outcome.GaveWay).
	gaveWay bool
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

// maxWorkerPods is the bound on the workers a job has at once.
func (c *MPIJobController) maxWorkerPods() int {
	if c.cfg.MaxWorkerPods > 0 {
		return c.cfg.MaxWorkerPods
	}
	return int(v2beta1.MaxWorkers)
}

// syncWorkers plans the workers and has the engine act on the plan
// (engine.Act): the files with the bookkeeping, the launcher's running pods
// told of them, the drain marks of the victims the written files no longer
// list, the creations, the deletions and the marks of replaced workers.
func (c *MPIJobController) syncWorkers(ctx context.Context, job *v2beta1.MPIJob, launcher *batchv1.Job, pods []*corev1.Pod, seen reconcile.Seen, now metav1.Time) (workerOutcome, error) {
	out := workerOutcome{
		workers: elastic.ParseWorkers(pods, func(p *corev1.Pod) (int, bool) { return workerIndex(job, p) }),
		spec:    workerSpec(job, c.resolvableWorkers(job, pods)),
		files:   c.cachedConfigMap(job),
	}
	out.spec.MaxPods = c.maxWorkerPods()
	if out.files != nil {
		out.spec.Listed = elastic.ListedPods(out.files.Data[discoverHostsKey])
	}
	mine, err := c.jobPods(job)
	if err == nil {
		err = c.Engine.Adopt(ctx, c.engineJob(job, now.Time), mine, workerLabels(job))
	}
	if err != nil {
		return out, err
	}
	var recorded elastic.State
	if out.files != nil {
		recorded = elastic.ParseState(out.files.Annotations)
	}
	out.plan = elastic.PlanWorkers(out.spec, out.workers, recorded.NextIndex, c.holders.Of(job, func(i int) string { return workerName(job, i) }), now.Time)
	clock := minReplicasClock(job, out.workers, recorded, now.Time)
	if clock.Expired() {
		ep := job.Spec.ElasticPolicy
		failJob(job, reasonWorkersBelowMinimum, fmt.Sprintf(
			"MPIJob %s/%s has had %d running worker(s), fewer than minReplicas %d, for longer than minReplicasTimeoutSeconds (%ds).",
			job.Namespace, job.Name, clock.Running, *ep.MinReplicas, *ep.MinReplicasTimeoutSeconds), now)
		return out, nil
	}
	ej := c.engineJob(job, now.Time)
	ej.Seen = seen
	acted, err := c.Engine.Act(ctx, ej, out.workers, out.plan, engine.Hooks{
		Files: func(ctx context.Context, plan elastic.Plan) (string, error) {
			state := elastic.State{NextIndex: plan.NextIndex, BelowMinSince: clock.Since}
			want := newConfigMap(job, plan.Hosts.Desired, plan.Hosts.Running, subdomains(job, pods), c.cfg.ClusterDomain, state.Annotations())
			files, err := reconcile.Ensure(ctx, owner(job), c.configMapChild(), want)
			if err != nil {
				return "", err
			}
			out.files = files
			return files.Data[discoverHostsKey], nil
		},
		Tell: func(ctx context.Context, script string) error {
			return c.refreshLauncherPods(ctx, job, launcher, script)
		},
		Worker: func(i int) *corev1.Pod { return newWorker(job, i, c.gang, c.cfg.ClusterDomain) },
		Event:  c.eventOn(job),
	})
	out.settled, out.gaveWay = acted.Settled, acted.GaveWay
	out.requeue = elastic.Sooner(acted.Requeue, clock.Left)
	return out, err
}

// workerLabels gives the labels by which the caches and selectors know a
// worker of job's of the name given; nil for any other name (the launcher's
// pods are the launcher Job's).
func workerLabels(job *v2beta1.MPIJob) func(name string) map[string]string {
	labels := podLabels(job, roleWorker)
	return func(name string) map[string]string {
		if _, ok := workerIndexOf(job, name); ok {
			return labels
		}
		return nil
	}
}

// jobPods are the pods the job controls: those of its pod cache, whatever
// their labels, and those of the other pods' cache (reconcile.Strays). The
// cached objects are read as they are, metadata only, not rebuilt into
// pods.
func (c *MPIJobController) jobPods(job *v2beta1.MPIJob) ([]metav1.Object, error) {
	cached, err := c.podIndexer.ByIndex(reconcile.ByControllerUID, string(job.UID))
	pods := reconcile.Strays(c.strays, job.UID)
	for _, o := range cached {
		if m, ok := o.(metav1.Object); ok {
			pods = append(pods, m)
		}
	}
	return pods, err
}

// engineJob is what the engine knows of job.
func (c *MPIJobController) engineJob(job *v2beta1.MPIJob, now time.Time) engine.Job {
	return engine.Job{
		Owner:       owner(job),
		UID:         job.UID,
		Generation:  job.Generation,
		Replicas:    int(workerReplicas(job)),
		Elastic:     job.Spec.ElasticPolicy != nil,
		DrainPeriod: drainPeriod(job),
		WorkerName:  func(i int) string { return workerName(job, i) },
		Now:         now,
	}
}

// eventOn records events on job.
func (c *MPIJobController) eventOn(job *v2beta1.MPIJob) func(eventType, reason, msg string) {
	return func(eventType, reason, msg string) { c.Recorder.Event(job, eventType, reason, msg) }
}

// cachedConfigMap is the job's ConfigMap as the cache has it; nil when it
// has none of the job's.
func (c *MPIJobController) cachedConfigMap(job *v2beta1.MPIJob) *corev1.ConfigMap {
	cm, err := c.configMaps.Get(job.Namespace, configMapName(job))
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
			conditions.Has(job.Status.Conditions, v2beta1.JobRunning), ws, recorded.BelowMinSince, now)
	}
	return elastic.MinReplicasClock{}
}

// stopWorkers deletes the given workers of a job that stops using them
// (suspended or finished): discover_hosts.sh is emptied first, so that none
// of them is deleted while it is listed.
// It returns how long to wait for the cache when it does not show the
// controller's last pod writes yet, and so leaves the pods alone.
func (c *MPIJobController) stopWorkers(ctx context.Context, job *v2beta1.MPIJob, pods []*corev1.Pod, seen reconcile.Seen) (time.Duration, error) {
	if len(pods) == 0 {
		return 0, nil
	}
	if !c.Expectations.SettledSince(seen, jobKey(job)) {
		// Their events bring the job back, or the wait expires.
		return reconcile.ExpectationsTimeout, nil
	}
	if err := c.emptyDiscovery(ctx, job); err != nil {
		return 0, err
	}
	return 0, c.Engine.Delete(ctx, c.engineJob(job, c.Clock.Now()), engine.Hooks{Event: c.eventOn(job)}, pods)
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
