package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/gang"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
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
	_, err := reconcile.Ensure(ctx, owner(job), c.podGroupChild(), newPodGroup(job, podGroupMinMember(job)))
	return err
}

func (c *MPIJobController) podGroupChild() reconcile.Child[*volcanov1beta1.PodGroup] {
	return reconcile.ChildOf("PodGroup", func(ns, name string) (*volcanov1beta1.PodGroup, error) { return c.pgLister.PodGroups(ns).Get(name) },
		func(ns string) reconcile.TypedClient[*volcanov1beta1.PodGroup] { return c.podGroups(ns) },
		gang.MergeVolcano)
}

// deletePodGroup removes the PodGroup of a finished job whose pods are
// being cleaned up, as the upstream operator did, so that volcano no longer
// holds a gang for pods that are gone. A job that keeps its running pods
// (cleanPodPolicy None) keeps its PodGroup with them.
func (c *MPIJobController) deletePodGroup(ctx context.Context, job *kubeflow.MPIJob) error {
	if c.pgLister == nil || !cleansRunningPods(job) {
		return nil
	}
	pg, err := c.pgLister.PodGroups(job.Namespace).Get(job.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !metav1.IsControlledBy(pg, job) || pg.DeletionTimestamp != nil {
		return nil
	}
	uid := pg.UID
	err = c.podGroups(job.Namespace).Delete(ctx, pg.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting PodGroup %s: %w", pg.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted the PodGroup of the finished job", "podGroup", klog.KObj(pg))
	return nil
}
