package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/kubeflow/mpi-operator/pkg/gang"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// syncPodGroup ensures the job's PodGroup for the configured gang
// scheduler; nothing without one.
func (c *MPIJobController) syncPodGroup(ctx context.Context, job *v2beta1.MPIJob) error {
	var err error
	switch {
	case c.volcanoGroups != nil:
		_, err = reconcile.Ensure(ctx, owner(job), c.volcanoGroupChild(), newVolcanoPodGroup(job))
	case c.schedPluginGroups != nil:
		_, err = reconcile.Ensure(ctx, owner(job), c.schedPluginsGroupChild(), newSchedulerPluginsPodGroup(job))
	}
	return err
}

func (c *MPIJobController) volcanoGroupChild() reconcile.Child[*volcanov1beta1.PodGroup] {
	return reconcile.ChildOf("PodGroup",
		func(ns, name string) (*volcanov1beta1.PodGroup, error) {
			return c.volcanoGroups.PodGroups(ns).Get(name)
		},
		func(ns string) reconcile.TypedClient[*volcanov1beta1.PodGroup] {
			return c.volcano.SchedulingV1beta1().PodGroups(ns)
		},
		gang.MergeVolcano)
}

func (c *MPIJobController) schedPluginsGroupChild() reconcile.Child[*schedv1alpha1.PodGroup] {
	return reconcile.ChildOf("PodGroup",
		func(ns, name string) (*schedv1alpha1.PodGroup, error) {
			return c.schedPluginGroups.PodGroups(ns).Get(name)
		},
		func(ns string) reconcile.TypedClient[*schedv1alpha1.PodGroup] {
			return c.schedPlugins.SchedulingV1alpha1().PodGroups(ns)
		},
		mergeSchedPluginsGroup)
}

// mergeSchedPluginsGroup takes the gang's size and minimum resources from
// want, and the scheduling timeout where the job sets one.
func mergeSchedPluginsGroup(cur, want *schedv1alpha1.PodGroup) (*schedv1alpha1.PodGroup, bool) {
	spec := *cur.Spec.DeepCopy()
	spec.MinMember = want.Spec.MinMember
	if want.Spec.MinResources != nil {
		spec.MinResources = want.Spec.MinResources.DeepCopy()
	}
	if want.Spec.ScheduleTimeoutSeconds != nil {
		spec.ScheduleTimeoutSeconds = ptr(*want.Spec.ScheduleTimeoutSeconds)
	}
	if semanticallyEqual(spec, cur.Spec) {
		return cur, false
	}
	merged := cur.DeepCopy()
	merged.Spec = spec
	return merged, true
}

// deletePodGroup deletes the job's PodGroup, if it has one: the gang of a
// suspended job, or of a finished one whose pods are cleaned up, holds
// nothing any more.
func (c *MPIJobController) deletePodGroup(ctx context.Context, job *v2beta1.MPIJob) error {
	var existing metav1.Object
	var del func(ctx context.Context, name string, opts metav1.DeleteOptions) error
	var err error
	switch {
	case c.volcanoGroups != nil:
		existing, err = c.volcanoGroups.PodGroups(job.Namespace).Get(podGroupName(job))
		del = c.volcano.SchedulingV1beta1().PodGroups(job.Namespace).Delete
	case c.schedPluginGroups != nil:
		existing, err = c.schedPluginGroups.PodGroups(job.Namespace).Get(podGroupName(job))
		del = c.schedPlugins.SchedulingV1alpha1().PodGroups(job.Namespace).Delete
	default:
		return nil
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !metav1.IsControlledBy(existing, job) || existing.GetDeletionTimestamp() != nil {
		return nil
	}
	uid := existing.GetUID()
	err = del(ctx, existing.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting PodGroup %s: %w", existing.GetName(), err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted PodGroup", "podGroup", klog.KRef(job.Namespace, existing.GetName()))
	return nil
}
