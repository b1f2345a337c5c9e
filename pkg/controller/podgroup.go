package controller

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
)

// podGroupMinMember is how many pods volcano must place together: the
// launcher and every worker, or for an elastic job its minimum of workers.
func podGroupMinMember(job *kubeflow.MPIJob) int32 {
	if ep := job.Spec.ElasticPolicy; ep != nil && ep.MinReplicas != nil {
		return *ep.MinReplicas + 1
	}
	return int32(desiredWorkers(job)) + 1
}

// syncPodGroup keeps the job's PodGroup in step with its size and
// scheduling policy. It does nothing without gang scheduling.
func (c *MPIJobController) syncPodGroup(ctx context.Context, job *kubeflow.MPIJob) error {
	if c.pgLister == nil {
		return nil
	}
	_, err := ensure(ctx, c, job, c.podGroupChild(), newPodGroup(job, podGroupMinMember(job)))
	return err
}

func (c *MPIJobController) podGroupChild() child[*volcanov1beta1.PodGroup] {
	return child[*volcanov1beta1.PodGroup]{
		kind: "PodGroup",
		get: func(ns, name string) (*volcanov1beta1.PodGroup, error) {
			return c.pgLister.PodGroups(ns).Get(name)
		},
		create: func(ctx context.Context, pg *volcanov1beta1.PodGroup) (*volcanov1beta1.PodGroup, error) {
			return c.podGroups(pg.Namespace).Create(ctx, pg, metav1.CreateOptions{})
		},
		update: func(ctx context.Context, pg *volcanov1beta1.PodGroup) (*volcanov1beta1.PodGroup, error) {
			return c.podGroups(pg.Namespace).Update(ctx, pg, metav1.UpdateOptions{})
		},
		merge: func(cur, want *volcanov1beta1.PodGroup) (*volcanov1beta1.PodGroup, bool) {
			merged := cur.DeepCopy()
			merged.Spec.MinMember = want.Spec.MinMember
			merged.Spec.Queue = want.Spec.Queue
			merged.Spec.PriorityClassName = want.Spec.PriorityClassName
			merged.Spec.MinResources = want.Spec.MinResources
			return merged, !equality.Semantic.DeepEqual(cur.Spec, merged.Spec)
		},
	}
}
