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
	"github.com/kubeflow/mpi-operator/pkg/metrics"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// maxCreatesPerSync bounds the pods one sync creates, so that a job with
// many workers to create does not hold a queue worker for seconds while other
// jobs wait to have their running workers listed.
const maxCreatesPerSync = 32

// Event reasons of the worker lifecycle.
const (
	eventScalingUp    = "WorkersScalingUp"
	eventDraining     = "WorkersDraining"
	eventScaledDown   = "WorkersScaledDown"
	eventDeletingPods = "DeletingPods"
)

// createWorkers creates the workers with the given indices. The Role already
// allows the launcher to exec into them. The requests go out in parallel
// batches that start small, as the Job controller's do.
func (c *MPIJobController) createWorkers(ctx context.Context, job *kubeflow.MPIJob, indices []int) error {
	if len(indices) == 0 {
		return nil
	}
	done, err := reconcile.InBatches(len(indices), 1, func(i int) error {
		_, err := c.pods.Create(ctx, owner(job), newWorker(job, indices[i], c.cfg.GangSchedulerName))
		return err
	})
	if len(done) > 0 {
		created := make([]int, len(done))
		for i, d := range done {
			created[i] = indices[d]
		}
		klog.FromContext(ctx).V(2).Info("Created workers", "indices", created)
		c.recorder.Eventf(job, corev1.EventTypeNormal, eventScalingUp, "Created %d worker(s): %s",
			len(created), joinNames(job, created))
		metrics.WorkerResizes.WithLabelValues("up").Inc()
	}
	return err
}

// markDraining takes the given workers out of discover_hosts.sh: the mark is
// on the pod itself, so that it outlives a restart of the controller. The
// pods are patched in parallel.
func (c *MPIJobController) markDraining(ctx context.Context, job *kubeflow.MPIJob, pods []*corev1.Pod, now metav1.Time) error {
	if len(pods) == 0 {
		return nil
	}
	since := now.UTC().Format(time.RFC3339Nano)
	done, err := reconcile.InBatches(len(pods), reconcile.MaxBatch, func(i int) error {
		if _, err := c.pods.Annotate(ctx, owner(job), pods[i], elastic.AnnotationDrainingSince, since); err != nil {
			return fmt.Errorf("marking worker %s draining: %w", pods[i].Name, err)
		}
		return nil
	})
	if names := podNames(pods, done); len(names) > 0 {
		klog.FromContext(ctx).V(2).Info("Draining workers", "pods", names)
		c.recorder.Eventf(job, corev1.EventTypeNormal, eventDraining, "Draining %d worker(s) before deletion: %v", len(names), names)
	}
	return err
}

// deleteWorkers deletes workers that no discovery script lists any more, in
// parallel.
func (c *MPIJobController) deleteWorkers(ctx context.Context, job *kubeflow.MPIJob, pods []*corev1.Pod) error {
	if len(pods) == 0 {
		return nil
	}
	done, err := reconcile.InBatches(len(pods), reconcile.MaxBatch, func(i int) error { return c.pods.Delete(ctx, owner(job), pods[i]) })
	if names := podNames(pods, done); len(names) > 0 {
		klog.FromContext(ctx).V(2).Info("Deleted workers", "pods", names)
		c.recorder.Eventf(job, corev1.EventTypeNormal, eventScaledDown, "Deleted %d worker(s): %v", len(names), names)
		metrics.WorkerResizes.WithLabelValues("down").Inc()
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

// observeDiscovery records, for workers just listed, how long after turning
// Running they reached discover_hosts.sh.
func (c *MPIJobController) observeDiscovery(ws []elastic.Worker, listed []string) {
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
		if since, ok := c.takeRunningSince(w.Pod.UID); ok {
			metrics.DiscoveryLatency.Observe(now.Sub(since).Seconds())
		}
	}
}

func joinNames(job *kubeflow.MPIJob, indices []int) string {
	names := make([]string, len(indices))
	for i, idx := range indices {
		names[i] = workerName(job, idx)
	}
	return fmt.Sprint(names)
}
