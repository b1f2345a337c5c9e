package controller

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/engine"
)

// The discovery fast path. Horovod asks discover_hosts.sh for hosts every
// second, so a worker that turns Running, or stops being usable, and the
// victims of a scale-in, should reach the script at once. In the main queue
// such a change waits its turn behind every other job's sync: a burst of job
// creations holds that queue for seconds. The pod events that change what
// the script lists, and changes of a job's worker replicas, therefore also
// go to a queue of their own. Its workers carry out the first steps of the
// main sync and nothing else: write the job's files, then tell its
// launcher, then mark the plan's victims draining (engine.Unlisted), through
// a client whose rate limit is their own (Config.ListingClient), so that the
// main sync's writes of a burst never hold them up. Creations, deletions, the Role
// and the status stay with the main sync, which has every event too.
//
// The fast path writes nothing that the main sync would not write from the
// same cache, in the same order:
//   - both paths hold the job's lock while they plan and write, so they
//     never act on a job at once;
//   - both follow one plan, elastic.PlanWorkers of the cached workers;
//   - the fast path acts only when the cache shows every pod the controller
//     patched or deleted, so that the plan does not mark a worker twice or
//     list a worker already marked;
//   - it acts on a job that still has workers to create too, so that the
//     first workers of a large job are listed while the rest are created:
//     the main sync creates them once it has released the job's lock,
//     through a client whose rate limit is their own, and the fast path
//     plans them as the main sync did (the files name them already; the
//     script lists running workers only);
//   - it takes the main sync's early exits, from the same function
//     (checkJob), so that it leaves alone every job the main sync would
//     only fail, hold or wind down: deleted, finished, past its deadline,
//     ended by its launcher, a fixed job with an evicted worker, an invalid
//     spec, a name someone else holds, below minReplicas for too long;
//   - besides, it leaves a job alone before its files exist: the main
//     sync creates them.
//
// A conflict (the cache is a moment behind the main sync's own ConfigMap
// write), like pod writes not in the cache yet, is retried a few times with
// a short backoff; after that, and after any other failure, the job is left
// to the main sync.

// maxDiscoveryRetries bounds the retries of one fast-path key: with the
// queue's backoff from 5 ms, the last one comes about 150 ms after the first
// try.
const maxDiscoveryRetries = 5

// errNotSettled asks for a retry: the cache does not show all of the
// controller's pod writes for the job yet.
var errNotSettled = errors.New("the cache does not show the controller's last pod writes yet")

// discoveryWorkers is how many workers the fast path runs beside threadiness
// main ones. A fast-path worker waits while the main sync holds its job's
// lock; the main workers hold at most threadiness locks at a time, so two
// more fast-path workers always find a job they can act on.
func discoveryWorkers(threadiness int) int { return threadiness + 2 }

// discoverable tells whether a pod is one discover_hosts.sh may list as far
// as the pod itself goes: a worker that elastic.Discoverable accepts.
func discoverable(pod *corev1.Pod) bool {
	return pod.Labels[labelMPIRole] == roleWorker && elastic.Discoverable(pod)
}

// enqueueResize sends a job whose worker replicas changed to the fast path,
// for the victims of a scale-in.
func (c *MPIJobController) enqueueResize(oldObj, newObj any) {
	oldJob, okOld := oldObj.(*kubeflow.MPIJob)
	newJob, okNew := newObj.(*kubeflow.MPIJob)
	if !okOld || !okNew || desiredWorkers(oldJob) == desiredWorkers(newJob) {
		return
	}
	c.discoveryQueue.Add(jobKey(newJob))
}

// discoverabilityChanged tells whether a pod event changes what
// discover_hosts.sh may list; newPod is nil when the pod is gone.
func discoverabilityChanged(oldPod, newPod *corev1.Pod) bool {
	return discoverable(oldPod) != (newPod != nil && discoverable(newPod))
}

func (c *MPIJobController) runDiscoveryWorker(ctx context.Context) {
	for c.processNextDiscoveryItem(ctx) {
	}
}

func (c *MPIJobController) processNextDiscoveryItem(ctx context.Context) bool {
	key, shutdown := c.discoveryQueue.Get()
	if shutdown {
		return false
	}
	defer c.discoveryQueue.Done(key)

	logger := klog.FromContext(ctx).WithValues("mpijob", key)
	ctx = klog.NewContext(ctx, logger)
	start := time.Now()
	err := c.syncDiscovery(ctx, key)
	observeSync("discovery", start)
	if err != nil && c.discoveryQueue.NumRequeues(key) < maxDiscoveryRetries {
		logger.V(4).Info("Discovery update failed; retrying", "err", err)
		c.discoveryQueue.AddRateLimited(key)
		return true
	}
	if err != nil {
		logger.V(4).Info("Discovery update failed; leaving it to the main sync", "err", err)
	}
	c.discoveryQueue.Forget(key)
	return true
}

// syncDiscovery marks a job's scale-in victims draining and brings its
// files, discover_hosts.sh first of all, in line with its workers.
func (c *MPIJobController) syncDiscovery(ctx context.Context, key string) error {
	c.jobLocks.LockKey(key)
	defer func() { _ = c.jobLocks.UnlockKey(key) }()

	logger := klog.FromContext(ctx)
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	shared, err := c.jobLister.MPIJobs(ns).Get(name)
	if err != nil {
		return nil
	}
	if c.expectations.Changing(key) {
		// Typically the launcher's refresh from a moment ago: its event
		// is on its way. (Pods created and not in the cache yet do not
		// matter here: they are not Running, and the plan's creations are
		// left to the main sync anyway.)
		return errNotSettled
	}
	if !c.hasConfigMap(shared) {
		logger.V(4).Info("Discovery left to the main sync", "reason", "no ConfigMap")
		return nil
	}
	now := metav1.NewTime(c.clock.Now())
	obs, exit, err := c.checkJob(shared, now)
	if err != nil || exit != exitNone {
		// The main sync, which has the same event, records why.
		logger.V(4).Info("Discovery left to the main sync", "reason", exit, "err", err)
		return nil
	}
	return c.listWorkers(ctx, obs, now)
}

// hasConfigMap tells whether the cache shows the job's ConfigMap: the fast
// path only updates it, the main sync creates it.
func (c *MPIJobController) hasConfigMap(job *kubeflow.MPIJob) bool {
	cm, err := c.cmLister.ConfigMaps(job.Namespace).Get(configMapName(job))
	return err == nil && metav1.IsControlledBy(cm, job)
}

// listWorkers carries out the engine's first steps of the main sync's
// plan for a job that checkJob let through: the files, the launcher told,
// then the drain marks of the victims the written files no longer list.
// The creations and deletions are the main sync's.
func (c *MPIJobController) listWorkers(ctx context.Context, obs *observed, now metav1.Time) error {
	job, launcher := obs.job, obs.launcher
	plan := elastic.PlanWorkers(c.planSpec(job), obs.workers, obs.recorded.NextIndex, c.workerNameHolder(job), now.Time)
	plan.Create, plan.Remove = nil, nil
	// The fast path's engine marks through the listing client; it
	// creates nothing, so it has no scale steps to remember.
	listing := &engine.Engine{Pods: c.listing.pods, Pace: c.engine.Pace}
	acted, _, err := listing.Prepare(ctx, engineJob(job, now.Time), obs.workers, plan,
		c.hooks(c.listing, job, &launcher, obs.belowMin.Since))
	if err != nil {
		return err
	}
	if acted.Held > 0 {
		c.discoveryQueue.AddAfter(jobKey(job), acted.Held)
		return nil
	}
	klog.FromContext(ctx).V(4).Info("Discovery synced", "running", plan.Hosts.Running)
	if acted.Written {
		c.observeDiscovery(jobKey(job), obs.workers, plan.Hosts.Running)
	}
	return nil
}
