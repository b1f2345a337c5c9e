package controller

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// The events that queue a job urgently (engine.Base.EnqueueChange). A v2
// worker is listed once it is Running and its name resolves, so the
// EndpointSlices of a job's Service count too (handleSlice).

// isWorker tells whether a pod of a job is one of its workers.
func isWorker(pod *corev1.Pod) bool { return pod.Labels[labelJobRole] == roleWorker }

// specReplicas is the worker replicas as the job spells them: the cache's
// objects are not defaulted, so -1 when unset.
func specReplicas(job *v2beta1.MPIJob) int64 {
	if spec := job.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeWorker]; spec != nil && spec.Replicas != nil {
		return int64(*spec.Replicas)
	}
	return -1
}
