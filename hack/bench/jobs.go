package main

import (
	"context"

	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
)

// benchImage is never pulled: kwok runs no containers.
const benchImage = "busybox:1.36"

// newJob returns an MPIJob with the given workers; elastic (with bounds
// and drain period) when ep is not nil.
func newJob(ns, name string, workers int, ep *kubeflow.ElasticPolicy) *kubeflow.MPIJob {
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
					Template: pod(corev1.Container{Name: "launcher", Image: benchImage,
						Command: []string{"sh", "-c", "while true; do /etc/mpi/discover_hosts.sh; sleep 1; done"}}),
				},
				kubeflow.MPIReplicaTypeWorker: {
					Replicas: ptr.To(int32(workers)),
					Template: pod(corev1.Container{Name: "worker", Image: benchImage}),
				},
			},
		},
	}
}

// scaleJob sets a job's worker replicas through the scale subresource, as
// `kubectl scale` does, retrying on conflicts with the operator's status
// writes.
func scaleJob(ctx context.Context, c *cluster, ns, name string, replicas int) error {
	jobs := c.mpi.KubeflowV1().MPIJobs(ns)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sc, err := jobs.GetScale(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		sc.Spec.Replicas = int32(replicas)
		_, err = jobs.UpdateScale(ctx, name, sc, metav1.UpdateOptions{})
		return err
	})
}
