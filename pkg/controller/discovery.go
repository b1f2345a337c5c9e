package controller

import (
	corev1 "k8s.io/api/core/v1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// isWorker tells whether a pod of a job is one of its workers.
func isWorker(pod *corev1.Pod) bool { return pod.Labels[labelMPIRole] == roleWorker }

// enqueuePodChange queues the job of a pod that changed or went, urgently
// when the change is one discover_hosts.sh must show.
func (c *MPIJobController) enqueuePodChange(key string, oldPod, newPod *corev1.Pod) {
	if elastic.DiscoverabilityChanged(oldPod, newPod, isWorker) {
		reconcile.AddUrgent(c.Queue, key)
		return
	}
	c.Queue.Add(key)
}

// handleJobUpdate queues a changed job, urgently when its worker replicas
// changed: a scale-in's victims leave the script, a scale-out's workers
// get their exec rights and are created.
func (c *MPIJobController) handleJobUpdate(oldObj, newObj any) {
	oldJob, okOld := oldObj.(*kubeflow.MPIJob)
	newJob, okNew := newObj.(*kubeflow.MPIJob)
	if okOld && okNew && desiredWorkers(oldJob) != desiredWorkers(newJob) {
		reconcile.AddUrgent(c.Queue, jobKey(newJob))
		return
	}
	c.enqueueJob(newObj)
}
