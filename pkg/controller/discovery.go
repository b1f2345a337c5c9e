package controller

import (
	corev1 "k8s.io/api/core/v1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
)

// Urgent keys. Horovod asks discover_hosts.sh for hosts every second, so a
// worker that turns Running, or stops being usable, and the victims of a
// scale-in, should reach the script at once. A burst of job creations fills
// the queue for seconds; the events that change what the script may list (a
// worker turning Running or ending, a drain mark, a change of the worker
// replicas, and the pod event that shows the last of the controller's own
// pod changes a job's files waited for) therefore queue their job urgently
// (engine.Base.Enqueue), ahead of every other key, and engine.UrgentWorkers
// workers take urgent keys only.
//
// An urgent key runs the same sync as any other, through the same guards:
// there is no second path. The queue hands a key to one worker at a time,
// so only one sync of a job runs at once. A sync that creates workers gives
// way between batches of creations when its own job was queued urgently
// meanwhile (engine.Engine.GiveWay): the next sync lists the worker that
// turned Running, then goes on creating.

func isWorkerPod(pod *corev1.Pod) bool { return pod.Labels[labelMPIRole] == roleWorker }

// discoverabilityChanged tells whether a pod event changes what
// discover_hosts.sh may list; newPod is nil when the pod is gone.
func discoverabilityChanged(oldPod, newPod *corev1.Pod) bool {
	return elastic.DiscoverabilityChanged(oldPod, newPod, isWorkerPod)
}

// resized tells whether a job update changes the worker replicas, and with
// them the victims of a scale-in or the workers of a scale-out.
func resized(oldObj, newObj any) bool {
	oldJob, okOld := oldObj.(*kubeflow.MPIJob)
	newJob, okNew := newObj.(*kubeflow.MPIJob)
	return okOld && okNew && desiredWorkers(oldJob) != desiredWorkers(newJob)
}
