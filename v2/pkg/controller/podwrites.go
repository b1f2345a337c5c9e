package controller

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeflow/mpi-operator/pkg/reconcile"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// Every pod write goes through createPod, annotatePod or deletePod, which
// tell the expectations first (the informer's event may come before the
// request returns), so that no sync repeats a write the cache does not show
// yet, and take the expectation back when the request fails.

// createPod creates one of the job's worker pods. A pod of that name that
// the job does not control is reported as in the way.
func (c *MPIJobController) createPod(ctx context.Context, job *v2beta1.MPIJob, pod *corev1.Pod) error {
	key := jobKey(job)
	c.expectations.ExpectCreate(key, pod.Name)
	_, err := c.kube.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err == nil {
		return nil
	}
	c.expectations.ObserveCreate(key, pod.Name)
	if apierrors.IsAlreadyExists(err) {
		live, getErr := c.kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if getErr == nil && !metav1.IsControlledBy(live, job) {
			return reconcile.NewForeignError(owner(job), "Pod", pod.Name)
		}
	}
	return fmt.Errorf("creating pod %s: %w", pod.Name, err)
}

// annotatePod sets one annotation of a pod of the job's. A pod that is gone
// needs none.
func (c *MPIJobController) annotatePod(ctx context.Context, job *v2beta1.MPIJob, pod *corev1.Pod, name, value string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{name: value}}})
	if err != nil {
		return err
	}
	key := jobKey(job)
	c.expectations.ExpectChange(key, pod.UID, reconcile.ShowsAnnotation(name, value))
	_, err = c.kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	switch {
	case apierrors.IsNotFound(err):
		c.expectations.ObserveGone(key, pod.UID)
		return nil
	case err != nil:
		c.expectations.ObserveGone(key, pod.UID)
		return fmt.Errorf("annotating pod %s: %w", pod.Name, err)
	}
	// The cache may show the result already: its event came first, or the
	// patch changed nothing and no event will come.
	if cached, getErr := c.podLister.Pods(pod.Namespace).Get(pod.Name); getErr == nil {
		c.expectations.Observe(key, cached)
	}
	return nil
}

// deletePod deletes exactly this pod, not a newer one of its name.
func (c *MPIJobController) deletePod(ctx context.Context, job *v2beta1.MPIJob, pod *corev1.Pod) error {
	key, uid := jobKey(job), pod.UID
	c.expectations.ExpectChange(key, uid, reconcile.ShowsDeletion)
	err := c.kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid},
	})
	if err == nil {
		return nil
	}
	// Nothing changed, so no event will come for it.
	c.expectations.ObserveGone(key, uid)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone already, or a newer pod has the name
	}
	return fmt.Errorf("deleting pod %s: %w", pod.Name, err)
}
