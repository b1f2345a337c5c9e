package harness

import (
	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
)

// jobImage is never pulled: kwok runs no containers.
const jobImage = "busybox:1.36"

// NewJob returns an MPIJob with the given workers, shaped like the examples
// (a launcher that reads discover_hosts.sh, one slot per worker); elastic,
// with its bounds and drain period, when ep is not nil.
func NewJob(ns, name string, workers int, ep *kubeflow.ElasticPolicy) *kubeflow.MPIJob {
	pod := func(container corev1.Container) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{container}}}
	}
	return &kubeflow.MPIJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: kubeflow.MPIJobSpec{
			SlotsPerWorker: ptr.To[int32](1),
			ElasticPolicy:  ep,
			MPIReplicaSpecs: map[common.ReplicaType]*common.ReplicaSpec{
				kubeflow.MPIReplicaTypeLauncher: {
					Replicas: ptr.To[int32](1),
					Template: pod(corev1.Container{Name: "launcher", Image: jobImage,
						Command: []string{"sh", "-c", "while true; do /etc/mpi/discover_hosts.sh; sleep 1; done"}}),
				},
				kubeflow.MPIReplicaTypeWorker: {
					Replicas: ptr.To(int32(workers)),
					Template: pod(corev1.Container{Name: "worker", Image: jobImage}),
				},
			},
		},
	}
}
