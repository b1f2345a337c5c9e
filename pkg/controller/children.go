package controller

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
)

// errResourceExists stops a sync that met an object with a child's name that
// the job does not control. The sync is retried with backoff, so the job
// proceeds once the object is gone.
var errResourceExists = errors.New("resource exists and is not managed by the MPIJob")

// child describes how to read and write one kind of child object.
type child[T metav1.Object] struct {
	kind   string
	get    func(namespace, name string) (T, error) // from a lister
	create func(ctx context.Context, obj T) (T, error)
	update func(ctx context.Context, obj T) (T, error)
	// merge returns cur with the parts the controller owns taken from want,
	// and whether that differs from cur. It must not modify cur.
	merge func(cur, want T) (T, bool)
}

// ensure gets or creates want and, when the existing object differs in what
// the controller owns, updates it. An object with the same name that the job
// does not control is never touched.
func ensure[T metav1.Object](ctx context.Context, c *MPIJobController, job *kubeflow.MPIJob, ch child[T], want T) (T, error) {
	logger := klog.FromContext(ctx)
	cur, err := ch.get(want.GetNamespace(), want.GetName())
	if apierrors.IsNotFound(err) {
		created, err := ch.create(ctx, want)
		if err == nil {
			logger.V(2).Info("Created child", "kind", ch.kind, "name", want.GetName())
			return created, nil
		}
		// AlreadyExists included: the retry compares the object once the
		// cache has it.
		return want, fmt.Errorf("creating %s %s: %w", ch.kind, want.GetName(), err)
	}
	if err != nil {
		return want, fmt.Errorf("getting %s %s: %w", ch.kind, want.GetName(), err)
	}
	if !metav1.IsControlledBy(cur, job) {
		c.resourceExists(job, ch.kind, want.GetName())
		return cur, errResourceExists
	}
	merged, changed := ch.merge(cur, want)
	if !changed {
		return cur, nil
	}
	updated, err := ch.update(ctx, merged)
	if err != nil {
		return cur, fmt.Errorf("updating %s %s: %w", ch.kind, want.GetName(), err)
	}
	logger.V(2).Info("Updated child", "kind", ch.kind, "name", want.GetName())
	return updated, nil
}

func (c *MPIJobController) resourceExists(job *kubeflow.MPIJob, kind, name string) {
	c.recorder.Eventf(job, corev1.EventTypeWarning, eventErrResourceExists,
		"%s %q already exists and is not managed by MPIJob %s", kind, name, job.Name)
}
