package controller

import (
	corev1 "k8s.io/api/core/v1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// Urgent syncs. Horovod asks discover_hosts.sh for hosts every second, so a
// worker that turns Running, or stops being usable, and the victims of a
// scale-in, should reach the script at once, not after every job queued
// before it: a burst of job creations fills the queue for seconds. The
// events that change what the script may list (a worker's phase, draining
// mark or end, a change of the worker replicas) therefore queue their job
// ahead of the others (reconcile.AddUrgent). Nothing else differs: an
// urgent key runs the one sync, with its guards and its order of writes,
// and the queue hands a job to one worker at a time. A write that conflicted
// because the cache was a moment behind is retried urgently again, after
// the queue's short backoff (reconcile.Settle).

// discoverable tells whether a pod is one discover_hosts.sh may list as far
// as the pod itself goes: a worker that elastic.Discoverable accepts.
func discoverable(pod *corev1.Pod) bool {
	return pod.Labels[labelMPIRole] == roleWorker && elastic.Discoverable(pod)
}

// discoverabilityChanged tells whether a pod event changes what
// discover_hosts.sh may list; newPod is nil when the pod is gone.
func discoverabilityChanged(oldPod, newPod *corev1.Pod) bool {
	return discoverable(oldPod) != (newPod != nil && discoverable(newPod))
}

// enqueuePodChange queues the job of a pod that changed or went, urgently
// when the change is one discover_hosts.sh must show.
func (c *MPIJobController) enqueuePodChange(key string, oldPod, newPod *corev1.Pod) {
	if discoverabilityChanged(oldPod, newPod) {
		reconcile.AddUrgent(c.queue, key)
		return
	}
	c.queue.Add(key)
}

// handleJobUpdate queues a changed job, urgently when its worker replicas
// changed: a scale-in's victims leave the script, a scale-out's workers
// get their exec rights and are created.
func (c *MPIJobController) handleJobUpdate(oldObj, newObj any) {
	oldJob, okOld := oldObj.(*kubeflow.MPIJob)
	newJob, okNew := newObj.(*kubeflow.MPIJob)
	if okOld && okNew && desiredWorkers(oldJob) != desiredWorkers(newJob) {
		reconcile.AddUrgent(c.queue, jobKey(newJob))
		return
	}
	c.enqueueJob(newObj)
}
