package reconcile

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Written lays a controller's own last writes of one kind of object over
// its informer's cache, for the moment the cache has yet to show them. A
// sync that follows its job's previous one at once (an urgent change, a
// sync that gave way) would otherwise start from the version before that
// sync's write, plan from files a step old, and update from a
// resourceVersion that can only conflict. It is client-go's MutationCache:
// a read returns whichever of the cached and the written object is newer,
// and a write is forgotten after ExpectationsTimeout, or sooner once 100
// newer ones have been recorded. An object that the cache does not have
// is not found, as from the cache: a write never brings a deleted object
// back.
type Written[T metav1.Object] struct {
	resource schema.GroupResource
	cache    cache.MutationCache
}

// NewWritten returns a Written over store, the cache of an informer of
// resource.
func NewWritten[T metav1.Object](ctx context.Context, resource schema.GroupResource, store cache.Store) *Written[T] {
	return &Written[T]{
		resource: resource,
		cache:    cache.NewIntegerResourceVersionMutationCache(klog.FromContext(ctx), store, nil, ExpectationsTimeout, false),
	}
}

// Get returns the object of the given name: the cache's, or the
// controller's last write of it when that is newer. It must not be
// modified.
func (w *Written[T]) Get(namespace, name string) (T, error) {
	var zero T
	obj, exists, err := w.cache.GetByKey(namespace + "/" + name)
	if err != nil {
		return zero, err
	}
	if !exists {
		return zero, apierrors.NewNotFound(w.resource, name)
	}
	t, ok := obj.(T)
	if !ok {
		return zero, fmt.Errorf("%s %s/%s: cached as %T", w.resource, namespace, name, obj)
	}
	return t, nil
}

// Remembering returns ch reading through w, which records every object
// that ch creates or updates, as the API server returned it.
func (ch Child[T]) Remembering(w *Written[T]) Child[T] {
	record := func(write func(context.Context, T) (T, error)) func(context.Context, T) (T, error) {
		return func(ctx context.Context, obj T) (T, error) {
			out, err := write(ctx, obj)
			if err == nil {
				w.cache.Mutation(out)
			}
			return out, err
		}
	}
	ch.Get = w.Get
	ch.Create, ch.Update = record(ch.Create), record(ch.Update)
	return ch
}
