package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/engine"
	"github.com/kubeflow/mpi-operator/pkg/metrics"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// maxCreatesPerSync bounds the pods one sync creates, so that a job with
// many workers to create does not hold a queue worker for seconds while other
// jobs wait to have their running workers listed.
const maxCreatesPerSync = 32

// eventDeletingPods is the reason of the event of a finished job's pods
// being deleted; the workers' own events are the engine's.
const eventDeletingPods = "DeletingPods"

// creation is what a sync creates once it has released the job's lock: the
// workers of the given indices, of the planned ones (all the step needs),
// then the launcher when launcherHash, the hash of the discover_hosts.sh it
// starts with, is set.
type creation struct {
	indices, planned []int
	launcherHash     *string
}

// create carries out c: the workers first, then the launcher.
func (c *MPIJobController) create(ctx context.Context, job *kubeflow.MPIJob, create creation) error {
	if err := c.createWorkers(ctx, job, create); err != nil {
		return err
	}
	if create.launcherHash == nil {
		return nil
	}
	return c.createLauncher(ctx, job, *create.launcherHash)
}

// createWorkers creates the workers of create. The Role already allows the
// launcher to exec into them. The requests go out in parallel batches that
// start small, as the Job controller's do, through the client for pod
// creations, whose rate limit is their own.
func (c *MPIJobController) createWorkers(ctx context.Context, job *kubeflow.MPIJob, create creation) error {
	indices := create.indices
	if len(indices) == 0 {
		return nil
	}
	done, err := reconcile.InBatches(len(indices), 1, func(i int) error {
		_, err := c.creations.Create(ctx, owner(job), newWorker(job, indices[i], c.cfg.GangSchedulerName))
		return err
	})
	if len(done) > 0 {
		created := make([]int, len(done))
		for i, d := range done {
			created[i] = indices[d]
		}
		klog.FromContext(ctx).V(2).Info("Created workers", "indices", created)
		if e, first := c.scaleSteps.Created(jobKey(job), job.UID, job.Generation, desiredWorkers(job),
			workerNames(job, create.planned)); first {
			c.recorder.Event(job, corev1.EventTypeNormal, e.Reason, e.Message)
			metrics.WorkerResizes.WithLabelValues("up").Inc()
		}
	}
	return err
}

// markDraining takes the given workers out of discover_hosts.sh: the mark is
// on the pod itself, so that it outlives a restart of the controller. The
// pods are patched in parallel.
func (c *MPIJobController) markDraining(ctx context.Context, w writePath, job *kubeflow.MPIJob, pods []*corev1.Pod, now metav1.Time) error {
	if len(pods) == 0 {
		return nil
	}
	since := now.UTC().Format(time.RFC3339Nano)
	done, err := reconcile.InBatches(len(pods), reconcile.MaxBatch, func(i int) error {
		if _, err := w.pods.Annotate(ctx, owner(job), pods[i], elastic.AnnotationDrainingSince, since); err != nil {
			return fmt.Errorf("marking worker %s draining: %w", pods[i].Name, err)
		}
		return nil
	})
	if names := podNames(pods, done); len(names) > 0 {
		klog.FromContext(ctx).V(2).Info("Draining workers", "pods", names)
		e := engine.Draining(desiredWorkers(job), names, drainPeriod(job))
		c.recorder.Event(job, corev1.EventTypeNormal, e.Reason, e.Message)
	}
	return err
}

// deleteWorkers deletes workers that no discovery script lists any more, in
// parallel. The deletion of drained workers ends the step that their
// draining event announced; only the others (finished workers outside a
// fixed job's range) have an event of their own.
func (c *MPIJobController) deleteWorkers(ctx context.Context, job *kubeflow.MPIJob, pods []*corev1.Pod) error {
	if len(pods) == 0 {
		return nil
	}
	done, err := reconcile.InBatches(len(pods), reconcile.MaxBatch, func(i int) error { return c.pods.Delete(ctx, owner(job), pods[i]) })
	if names := podNames(pods, done); len(names) > 0 {
		klog.FromContext(ctx).V(2).Info("Deleted workers", "pods", names)
		metrics.WorkerResizes.WithLabelValues("down").Inc()
	}
	deleted := make([]*corev1.Pod, len(done))
	for i, d := range done {
		deleted[i] = pods[d]
	}
	if e, ok := engine.Deleted(deleted); ok {
		c.recorder.Event(job, corev1.EventTypeNormal, e.Reason, e.Message)
	}
	return err
}

// podNames returns the names of pods[i] for each i in which.
func podNames(pods []*corev1.Pod, which []int) []string {
	names := make([]string, len(which))
	for i, w := range which {
		names[i] = pods[w].Name
	}
	return names
}

func jobKey(job *kubeflow.MPIJob) string { return job.Namespace + "/" + job.Name }

// observeDiscovery records, for workers of job key just listed, how long
// after turning Running they reached discover_hosts.sh.
func (c *MPIJobController) observeDiscovery(key string, ws []elastic.Worker, listed []string) {
	if len(listed) == 0 {
		return
	}
	in := make(map[string]bool, len(listed))
	for _, n := range listed {
		in[n] = true
	}
	now := c.clock.Now()
	for _, w := range ws {
		if !in[w.Pod.Name] {
			continue
		}
		if since, ok := c.runningSince.take(key, w.Pod.UID); ok {
			metrics.DiscoveryLatency.Observe(now.Sub(since).Seconds())
		}
	}
}

func workerNames(job *kubeflow.MPIJob, indices []int) []string {
	names := make([]string, len(indices))
	for i, idx := range indices {
		names[i] = workerName(job, idx)
	}
	return names
}
