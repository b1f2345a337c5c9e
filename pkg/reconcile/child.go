package reconcile

import (
	"context"
	"fmt"
	"maps"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// Owner is the object whose children Ensure writes: a child is the owner's
// when its controller reference carries the owner's UID. Kind is the
// owner's kind, such as "MPIJob", which errors name: the metadata of an
// object read from a typed cache does not carry it.
type Owner struct {
	Kind   string
	Object metav1.Object
}

// Key is the owner's queue key, "namespace/name", under which the
// expectations of its pod writes are kept.
func (o Owner) Key() string { return o.Object.GetNamespace() + "/" + o.Object.GetName() }

// controls tells whether obj's controller reference is the owner.
func (o Owner) controls(obj metav1.Object) bool {
	return metav1.IsControlledBy(obj, o.Object)
}

// Child describes how to read and write one kind of child object. Every
// function must be set.
type Child[T metav1.Object] struct {
	// Kind is the child's kind, such as "ConfigMap", for errors and logs.
	Kind string
	// Get reads the object from a lister.
	Get func(namespace, name string) (T, error)
	// Fetch reads the object from the API server, for when the lister
	// cannot see it: its informer may select by a label the object lacks.
	Fetch  func(ctx context.Context, namespace, name string) (T, error)
	Create func(ctx context.Context, obj T) (T, error)
	Update func(ctx context.Context, obj T) (T, error)
	// Merge returns cur with the parts the controller owns taken from want,
	// and whether that differs from cur. It must not modify cur.
	Merge func(cur, want T) (T, bool)
}

// TypedClient is what ChildOf needs of the typed client of one namespace,
// as client-go's generated clients provide it.
type TypedClient[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// ChildOf describes a kind of child that is read from a lister (get) and
// fetched and written through the typed client of its namespace; merge is
// as Child's.
func ChildOf[T metav1.Object](kind string, get func(namespace, name string) (T, error),
	client func(namespace string) TypedClient[T], merge func(cur, want T) (T, bool)) Child[T] {
	return Child[T]{
		Kind: kind,
		Get:  get,
		Fetch: func(ctx context.Context, ns, name string) (T, error) {
			return client(ns).Get(ctx, name, metav1.GetOptions{})
		},
		Create: func(ctx context.Context, obj T) (T, error) {
			return client(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{})
		},
		Update: func(ctx context.Context, obj T) (T, error) {
			return client(obj.GetNamespace()).Update(ctx, obj, metav1.UpdateOptions{})
		},
		Merge: merge,
	}
}

// Keep is the merge of a child whose existing object the controller never
// updates: nothing of it beyond its name is the controller's.
func Keep[T any](cur, _ T) (T, bool) { return cur, false }

// Ensure gets or creates want, a child of owner, and, when the existing
// object differs in what the controller owns, updates it. It returns the
// object as created, updated or read from the cache, and want itself when
// none could be read. An object with want's name that owner does not control is never
// touched: Ensure returns a *ForeignError for it, also when only a create
// that failed with AlreadyExists reveals the object, because the lister
// cannot see it. Any other error is wrapped with the child's kind and name.
func Ensure[T metav1.Object](ctx context.Context, owner Owner, ch Child[T], want T) (T, error) {
	cur, err := ch.Get(want.GetNamespace(), want.GetName())
	if apierrors.IsNotFound(err) {
		return create(ctx, owner, ch, want)
	}
	if err != nil {
		return want, fmt.Errorf("getting %s %s: %w", ch.Kind, want.GetName(), err)
	}
	if !owner.controls(cur) {
		return cur, NewForeignError(owner, ch.Kind, want.GetName())
	}
	return update(ctx, ch, cur, want)
}

// create creates want, which the cache does not show.
func create[T metav1.Object](ctx context.Context, owner Owner, ch Child[T], want T) (T, error) {
	if err := held(ctx, ch.Kind, want.GetName()); err != nil {
		return want, err
	}
	created, err := ch.Create(ctx, want)
	if err == nil {
		charge(ctx, created)
		klog.FromContext(ctx).V(2).Info("Created child", "kind", ch.Kind, "name", want.GetName())
		return created, nil
	}
	if apierrors.IsAlreadyExists(err) {
		// Either the cache has yet to show the owner's own object, and the
		// retry compares it; or the object is the owner's but lost the
		// labels the informer selects by, and gets them back; or it was
		// never the owner's.
		live, getErr := ch.Fetch(ctx, want.GetNamespace(), want.GetName())
		switch {
		case getErr != nil:
		case !owner.controls(live):
			return want, NewForeignError(owner, ch.Kind, want.GetName())
		case Relabel(live, want.GetLabels()):
			adopted, err := ch.Update(ctx, live)
			if err != nil {
				return want, fmt.Errorf("restoring the labels of %s %s: %w", ch.Kind, want.GetName(), err)
			}
			charge(ctx, adopted)
			klog.FromContext(ctx).Info("Restored the labels of a child the informer could not see", "kind", ch.Kind, "name", want.GetName())
			return update(ctx, ch, adopted, want)
		}
	}
	return want, fmt.Errorf("creating %s %s: %w", ch.Kind, want.GetName(), err)
}

// Relabel gives obj, an object read live, every label of labels it lacks
// or holds with another value, and tells whether it changed any. The
// informers see a job's children through their labels: a child whose labels
// a user or a mutating policy took away is found only by the create that
// fails, and is adopted back by its owner through them.
func Relabel(obj metav1.Object, labels map[string]string) bool {
	if HasLabels(obj, labels) {
		return false
	}
	have := obj.GetLabels()
	if have == nil {
		have = make(map[string]string, len(labels))
	}
	maps.Copy(have, labels)
	obj.SetLabels(have)
	return true
}

// update writes what the controller owns of want into cur, if it differs.
func update[T metav1.Object](ctx context.Context, ch Child[T], cur, want T) (T, error) {
	merged, changed := ch.Merge(cur, want)
	if !changed {
		return cur, nil
	}
	if err := held(ctx, ch.Kind, want.GetName()); err != nil {
		return cur, err
	}
	updated, err := ch.Update(ctx, merged)
	if err != nil {
		return cur, fmt.Errorf("updating %s %s: %w", ch.Kind, want.GetName(), err)
	}
	charge(ctx, updated)
	klog.FromContext(ctx).V(2).Info("Updated child", "kind", ch.Kind, "name", want.GetName())
	return updated, nil
}
