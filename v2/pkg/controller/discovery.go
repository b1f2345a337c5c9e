package controller

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// Urgent keys. Horovod asks discover_hosts.sh for hosts every second, so a
// worker whose name starts to resolve, or that stops being usable, and the
// victims of a scale-in, should reach the script at once. The controller has
// one queue, and a burst of job creations fills it for seconds; the events
// that change what the script may list (a worker turning Running or ending,
// a drain mark, an EndpointSlice of the job's Service, a change of the
// worker replicas, and the pod event that shows the last of the
// controller's own pod changes a job's files waited for) therefore queue
// their job urgently, ahead of the keys of
// every other event, and engine.UrgentWorkers workers take urgent keys
// only. A sync that creates workers gives way between batches of creations
// once its own job was queued urgently (engine.Engine.GiveWay).
//
// Nothing else tells an urgent key from another: it runs the same sync,
// through the same guards. The queue hands a key to one worker at a time,
// so only one sync of a job runs at once, and each sync sees the previous
// one's writes through the expectations and the cache. A write that
// conflicted because the cache was a moment behind is retried at the
// priority its key had (reconcile.Settle), after the queue's backoff of
// 5 ms, then 10 ms, doubling on each failure in a row; what else a sync
// asks for next (a requeue after a drain period, the retry of any other
// failure) goes back to the queue without urgency.

// isWorker tells whether a pod of a job is one of its workers.
func isWorker(pod *corev1.Pod) bool { return pod.Labels[labelJobRole] == roleWorker }

// discoverabilityChanged tells whether a pod event changes what
// discover_hosts.sh may list; newPod is nil when the pod is gone. (A
// worker's name must also resolve: the EndpointSlice events cover that.)
func discoverabilityChanged(oldPod, newPod *corev1.Pod) bool {
	return elastic.DiscoverabilityChanged(oldPod, newPod, isWorker)
}

// resized tells whether a job update changes the worker replicas, and with
// them the victims of a scale-in or the workers of a scale-out.
func resized(oldObj, newObj any) bool {
	oldJob, okOld := oldObj.(*v2beta1.MPIJob)
	newJob, okNew := newObj.(*v2beta1.MPIJob)
	return okOld && okNew && !equalPtr(specReplicas(oldJob), specReplicas(newJob))
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
