package controller

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
)

// errResourceExists stops a sync that met an object with a child's name that
// the job does not control. The sync is retried with backoff, so the job
// proceeds once the object is gone. Every such error is a *foreignError,
// which names the object.
var errResourceExists = errors.New("resource exists and is not managed by the MPIJob")

// foreignError is an object in the way of one of the job's children: it has
// the child's name and the job does not control it.
type foreignError struct {
	kind, name, job string
}

func (e *foreignError) Error() string {
	return fmt.Sprintf("%s %q already exists and is not managed by MPIJob %s", e.kind, e.name, e.job)
}

func (e *foreignError) Is(target error) bool { return target == errResourceExists }

func newForeignError(job *kubeflow.MPIJob, kind, name string) error {
	return &foreignError{kind: kind, name: name, job: job.Name}
}

// child describes how to read and write one kind of child object.
type child[T metav1.Object] struct {
	kind string
	get  func(namespace, name string) (T, error) // from a lister
	// fetch reads the object from the API server, for when the lister
	// cannot see it: its informer selects by a label it may lack.
	fetch  func(ctx context.Context, namespace, name string) (T, error)
	create func(ctx context.Context, obj T) (T, error)
	update func(ctx context.Context, obj T) (T, error)
	// merge returns cur with the parts the controller owns taken from want,
	// and whether that differs from cur. It must not modify cur.
	merge func(cur, want T) (T, bool)
}

// ensure gets or creates want and, when the existing object differs in what
// the controller owns, updates it. An object with the same name that the job
// does not control is never touched.
func ensure[T metav1.Object](ctx context.Context, job *kubeflow.MPIJob, ch child[T], want T) (T, error) {
	logger := klog.FromContext(ctx)
	cur, err := ch.get(want.GetNamespace(), want.GetName())
	if apierrors.IsNotFound(err) {
		created, err := ch.create(ctx, want)
		if err == nil {
			logger.V(2).Info("Created child", "kind", ch.kind, "name", want.GetName())
			return created, nil
		}
		if apierrors.IsAlreadyExists(err) {
			// Either the cache has yet to show the job's own object, and
			// the retry compares it, or the object was never the job's and
			// lacks the label the informer selects by.
			if live, getErr := ch.fetch(ctx, want.GetNamespace(), want.GetName()); getErr == nil && !metav1.IsControlledBy(live, job) {
				return want, newForeignError(job, ch.kind, want.GetName())
			}
		}
		return want, fmt.Errorf("creating %s %s: %w", ch.kind, want.GetName(), err)
	}
	if err != nil {
		return want, fmt.Errorf("getting %s %s: %w", ch.kind, want.GetName(), err)
	}
	if !metav1.IsControlledBy(cur, job) {
		return cur, newForeignError(job, ch.kind, want.GetName())
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
