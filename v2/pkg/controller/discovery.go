package controller

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// The discovery lane. Horovod asks discover_hosts.sh for hosts every
// second, so a worker whose name starts to resolve, or that stops being
// usable, and the victims of a scale-in, should reach the script at once.
// In the main queue such a change waits its turn behind every other job's
// sync: a burst of job creations holds that queue for seconds. The events
// that change what the script may list (a worker's phase or end, an
// EndpointSlice of a job's Service, a change of the worker replicas)
// therefore also go to a queue of their own, whose workers run the very
// same sync. Nothing is decided twice: the lane differs from the main queue
// only in what brings a job to it.
//
// A lock per job keeps the two from syncing one job at once, so each sync
// sees the other's writes through the expectations and the cache, exactly
// as two successive syncs of the main queue would. A write that conflicts
// because the cache is a moment behind the other queue's last write is
// retried in the lane a few times with a short backoff: sent to the main
// queue, the retry would wait behind every job queued there. What the
// lane's sync asks for next otherwise (a requeue after a drain period, a
// retry after any other error, or after those few) goes to the main queue,
// which owns the job's backoff.

// discoveryWorkers is how many workers the lane runs beside threadiness main
// ones. A lane worker waits while a main worker holds its job's lock; the
// main workers hold at most threadiness locks at a time, so two more lane
// workers always find a job they can sync.
func discoveryWorkers(threadiness int) int { return threadiness + 2 }

// maxDiscoveryRetries bounds the lane's retries of a conflict: with its
// backoff from 5 ms, the last comes about 150 ms after the first try.
const maxDiscoveryRetries = 5

// lockStripes is the number of locks the jobs' keys are spread over.
const lockStripes = 1024

// discoverable tells whether a pod is one discover_hosts.sh may list as far
// as the pod itself goes: a worker that elastic.Discoverable accepts. (Its
// name must also resolve: the EndpointSlice events cover that.)
func discoverable(pod *corev1.Pod) bool {
	return pod.Labels[labelJobRole] == roleWorker && elastic.Discoverable(pod)
}

// discoverabilityChanged tells whether a pod event changes what
// discover_hosts.sh may list; newPod is nil when the pod is gone.
func discoverabilityChanged(oldPod, newPod *corev1.Pod) bool {
	was := oldPod != nil && discoverable(oldPod)
	return was != (newPod != nil && discoverable(newPod))
}

// lockedSync is the sync of either queue, under the job's lock.
func (c *MPIJobController) lockedSync(ctx context.Context, key string) (time.Duration, error) {
	c.jobLocks.LockKey(key)
	defer func() { _ = c.jobLocks.UnlockKey(key) }()
	return c.syncHandler(ctx, key)
}

// startDiscoveryWorkers starts n goroutines that take jobs from the lane.
func (c *MPIJobController) startDiscoveryWorkers(ctx context.Context, wg *sync.WaitGroup, n int) {
	for range n {
		wg.Go(func() {
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				for c.processNextDiscovery(ctx) {
				}
			}, time.Second)
		})
	}
}

// processNextDiscovery syncs the next job of the lane; false once the lane
// shuts down.
func (c *MPIJobController) processNextDiscovery(ctx context.Context) bool {
	key, quit := c.discoveryQueue.Get()
	if quit {
		return false
	}
	defer c.discoveryQueue.Done(key)
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("mpijob", key, "lane", "discovery"))
	requeue, err := c.lockedSync(ctx, key)
	if apierrors.IsConflict(err) && c.discoveryQueue.NumRequeues(key) < maxDiscoveryRetries {
		klog.FromContext(ctx).V(4).Info("Retrying in the discovery lane after a conflict", "err", err)
		c.discoveryQueue.AddRateLimited(key)
		return true
	}
	c.discoveryQueue.Forget(key)
	reconcile.Settle(ctx, c.queue, key, requeue, err)
	return true
}

// enqueueDiscovery sends the job of a worker whose discoverability changed
// to the lane.
func (c *MPIJobController) enqueueDiscovery(oldPod, newPod *corev1.Pod) {
	pod := newPod
	if pod == nil {
		pod = oldPod
	}
	if !discoverabilityChanged(oldPod, newPod) {
		return
	}
	if key, ok := podJob(pod); ok {
		c.discoveryQueue.Add(key)
	}
}

// enqueueResize sends a job whose worker replicas changed to the lane, for
// the victims of a scale-in and the workers of a scale-out.
func (c *MPIJobController) enqueueResize(oldObj, newObj any) {
	oldJob, okOld := oldObj.(*v2beta1.MPIJob)
	newJob, okNew := newObj.(*v2beta1.MPIJob)
	if okOld && okNew && !equalPtr(specReplicas(oldJob), specReplicas(newJob)) {
		c.discoveryQueue.Add(jobKey(newJob))
	}
}

func equalPtr[T comparable](a, b *T) bool {
	return a == b || (a != nil && b != nil && *a == *b)
}

// specReplicas is the worker replicas as the job spells them: the cache's
// objects are not defaulted, so nil when unset.
func specReplicas(job *v2beta1.MPIJob) *int32 {
	if spec := job.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeWorker]; spec != nil {
		return spec.Replicas
	}
	return nil
}
