package podcache

import (
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// AsPod returns the pod that a cache object stands for: a *corev1.Pod as
// it is (tests put whole pods in the cache), a *Pod rebuilt into one, or
// nil for anything else. The pod shares the cached object's maps and
// slices: like every cached object, it must not be modified.
func AsPod(obj any) *corev1.Pod {
	switch p := obj.(type) {
	case *corev1.Pod:
		return p
	case *Pod:
		pod := &corev1.Pod{}
		p.fill(pod)
		return pod
	}
	return nil
}

// Select returns the pods among objs, cache objects, that selector matches.
// Those rebuilt from a *Pod share one allocation, whose capacity never
// grows, so that the pointers into it stay valid.
func Select(objs []any, selector labels.Selector) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(objs))
	var rebuilt []corev1.Pod
	for _, o := range objs {
		switch p := o.(type) {
		case *Pod:
			if selector.Matches(labels.Set(p.Labels)) {
				if rebuilt == nil {
					rebuilt = make([]corev1.Pod, 0, len(objs))
				}
				rebuilt = rebuilt[:len(rebuilt)+1]
				p.fill(&rebuilt[len(rebuilt)-1])
				out = append(out, &rebuilt[len(rebuilt)-1])
			}
		case *corev1.Pod:
			if selector.Matches(labels.Set(p.Labels)) {
				out = append(out, p)
			}
		}
	}
	return out
}

// asEvent is AsPod for what an event handler receives, which may also be
// the tombstone of a pod whose deletion the informer missed.
func asEvent(obj any) any {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		if p := AsPod(tombstone.Obj); p != nil {
			tombstone.Obj = p
		}
		return tombstone
	}
	if p := AsPod(obj); p != nil {
		return p
	}
	return obj
}

// Events wraps the handlers of a pod informer whose transform is a
// Trimmer's, so that they receive *corev1.Pod objects.
func Events(h cache.ResourceEventHandlerFuncs) cache.ResourceEventHandlerFuncs {
	out := cache.ResourceEventHandlerFuncs{}
	if h.AddFunc != nil {
		out.AddFunc = func(obj any) { h.AddFunc(asEvent(obj)) }
	}
	if h.UpdateFunc != nil {
		out.UpdateFunc = func(oldObj, newObj any) { h.UpdateFunc(asEvent(oldObj), asEvent(newObj)) }
	}
	if h.DeleteFunc != nil {
		out.DeleteFunc = func(obj any) { h.DeleteFunc(asEvent(obj)) }
	}
	return out
}

// Lister reads a pod informer's cache as a PodLister.
type Lister struct{ Indexer cache.Indexer }

var _ corelisters.PodLister = Lister{}

// List returns the cached pods that selector matches, in every namespace.
func (c Lister) List(selector labels.Selector) ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	err := cache.ListAll(c.Indexer, selector, func(obj any) {
		if p := AsPod(obj); p != nil {
			out = append(out, p)
		}
	})
	return out, err
}

// Pods reads the cached pods of one namespace.
func (c Lister) Pods(namespace string) corelisters.PodNamespaceLister {
	return namespaceLister{indexer: c.Indexer, namespace: namespace}
}

type namespaceLister struct {
	indexer   cache.Indexer
	namespace string
}

// List returns the cached pods of the namespace that selector matches.
func (c namespaceLister) List(selector labels.Selector) ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	err := cache.ListAllByNamespace(c.indexer, c.namespace, selector, func(obj any) {
		if p := AsPod(obj); p != nil {
			out = append(out, p)
		}
	})
	return out, err
}

// Get returns the cached pod name of the namespace, or a NotFound error.
func (c namespaceLister) Get(name string) (*corev1.Pod, error) {
	obj, exists, err := c.indexer.GetByKey(c.namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	p := AsPod(obj)
	if !exists || p == nil {
		return nil, apierrors.NewNotFound(corev1.Resource("pod"), name)
	}
	return p, nil
}
