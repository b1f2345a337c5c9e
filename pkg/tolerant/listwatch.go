// Package tolerant lists and watches a custom resource for an informer one
// object at a time, so that an object the operator cannot decode is skipped
// instead of failing the whole list.
//
// A typed client decodes a list in one piece: one object whose field holds
// a value of the wrong type (stored through a version served without a
// schema, or before the schema had the rule) fails the list, the reflector
// retries it without end, and no object of the resource in any namespace is
// reconciled again. A watch event of such an object ends the watch the same
// way. Here the API server's answer is read as unstructured JSON and each
// object decoded on its own with the clientset's own decoder:
//   - a list keeps the objects that decode and leaves the others out;
//   - a watch event whose object does not decode becomes a deletion of that
//     object, so the cache forgets the last version it could read instead
//     of acting on it, and an object that becomes readable again arrives as
//     an addition;
//   - each version of an object that does not decode is reported once to a
//     [Reporter], with the decoder's message, which names the field.
package tolerant

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/kubeflow/mpi-operator/pkg/metrics"
)

// Resource is what to list and watch, and how to decode it.
type Resource struct {
	// GVR names the resource; Kind is its objects' kind.
	GVR  schema.GroupVersionResource
	Kind string
	// Namespace limits the lists and watches; empty means all.
	Namespace string
	// Decoder decodes one object's JSON into a typed object: the typed
	// clientset's own (its scheme's UniversalDeserializer), so that what
	// decodes here is what the typed client would decode.
	Decoder runtime.Decoder
	// NewObject and NewList return an empty typed object and list.
	NewObject func() runtime.Object
	NewList   func() runtime.Object
}

// ResourceOf describes the resource of gvr, whose objects are of kind and
// Go type T and whose lists are of type L, decoded by decoder.
func ResourceOf[T, L any, PT interface {
	*T
	runtime.Object
}, PL interface {
	*L
	runtime.Object
}](gvr schema.GroupVersionResource, kind, namespace string, decoder runtime.Decoder) Resource {
	return Resource{GVR: gvr, Kind: kind, Namespace: namespace, Decoder: decoder,
		NewObject: func() runtime.Object { return PT(new(T)) },
		NewList:   func() runtime.Object { return PL(new(L)) }}
}

// Reporter is told of each version of an object that cannot be decoded.
// ref names the object (kind, namespace, name, UID, resourceVersion).
type Reporter func(ref *corev1.ObjectReference, err error)

// Skips remembers which versions of undecodable objects have been reported,
// so that a relist of an unchanged object reports nothing new, and tells a
// Reporter of the others. The Reporter may be set after the informer exists
// (the controller that records the events is built after its informers) but
// must be set before the informer starts.
type Skips struct {
	mu       sync.Mutex
	reporter Reporter
	reported map[types.UID]string // UID -> resourceVersion reported
}

// NewSkips returns Skips that report to nobody until SetReporter.
func NewSkips() *Skips { return &Skips{reported: map[types.UID]string{}} }

// SetReporter sets who is told of the skipped objects.
func (s *Skips) SetReporter(r Reporter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reporter = r
}

// skip reports ref unless its version was reported already.
func (s *Skips) skip(ref *corev1.ObjectReference, err error) {
	s.mu.Lock()
	if rv, ok := s.reported[ref.UID]; ok && rv == ref.ResourceVersion {
		s.mu.Unlock()
		return
	}
	s.reported[ref.UID] = ref.ResourceVersion
	report := s.reporter
	s.mu.Unlock()
	if report != nil {
		report(ref, err)
	}
}

// forget drops what was remembered of an object that decoded or is gone.
func (s *Skips) forget(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.reported, uid)
}

// NewInformer returns a shared index informer of r's typed objects, fed by
// NewListWatch, with the namespace index that generated informers have.
func NewInformer(client dynamic.Interface, r Resource, skips *Skips, resync time.Duration) cache.SharedIndexInformer {
	return cache.NewSharedIndexInformer(NewListWatch(client, r, skips), r.NewObject(), resync,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

// InformerFunc is NewInformer in the form that the InformerFor of a
// generated informer factory of clientset type C takes.
func InformerFunc[C any](client dynamic.Interface, r Resource, skips *Skips) func(C, time.Duration) cache.SharedIndexInformer {
	return func(_ C, resync time.Duration) cache.SharedIndexInformer {
		return NewInformer(client, r, skips, resync)
	}
}

// NewListWatch returns a ListerWatcher of r's typed objects that skips,
// and reports to skips, the objects that cannot be decoded.
func NewListWatch(client dynamic.Interface, r Resource, skips *Skips) cache.ListerWatcher {
	ri := client.Resource(r.GVR).Namespace(r.Namespace)
	d := decoder{Resource: r, skips: skips}
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
			list, err := ri.List(ctx, options)
			if err != nil {
				return nil, err
			}
			return d.list(list)
		},
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			w, err := ri.Watch(ctx, options)
			if err != nil {
				return nil, err
			}
			return newDecodingWatch(w, d), nil
		},
	}, client)
}

// decoder turns unstructured objects into r's typed ones.
type decoder struct {
	Resource
	skips *Skips
}

// object decodes u, or reports it and returns the error.
func (d decoder) object(u *unstructured.Unstructured) (runtime.Object, error) {
	obj, err := d.decode(u)
	if err != nil {
		d.skips.skip(d.ref(u), err)
		return nil, err
	}
	d.skips.forget(u.GetUID())
	return obj, nil
}

func (d decoder) decode(u *unstructured.Unstructured) (runtime.Object, error) {
	data, err := u.MarshalJSON()
	if err != nil {
		return nil, err
	}
	obj, _, err := d.Decoder.Decode(data, nil, d.NewObject())
	return obj, err
}

// list decodes every item of list, leaving out those that do not decode.
func (d decoder) list(list *unstructured.UnstructuredList) (runtime.Object, error) {
	items := make([]runtime.Object, 0, len(list.Items))
	for i := range list.Items {
		if obj, err := d.object(&list.Items[i]); err == nil {
			items = append(items, obj)
		}
	}
	out := d.NewList()
	if err := meta.SetList(out, items); err != nil {
		return nil, err
	}
	lm, err := meta.ListAccessor(out)
	if err != nil {
		return nil, err
	}
	lm.SetResourceVersion(list.GetResourceVersion())
	lm.SetContinue(list.GetContinue())
	lm.SetRemainingItemCount(list.GetRemainingItemCount())
	return out, nil
}

// stub is a typed object that carries only u's identity, for the deletion
// of an object that cannot be decoded.
func (d decoder) stub(u *unstructured.Unstructured) runtime.Object {
	obj := d.NewObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return obj
	}
	m.SetNamespace(u.GetNamespace())
	m.SetName(u.GetName())
	m.SetUID(u.GetUID())
	m.SetResourceVersion(u.GetResourceVersion())
	return obj
}

func (d decoder) ref(u *unstructured.Unstructured) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion:      d.GVR.GroupVersion().String(),
		Kind:            d.Kind,
		Namespace:       u.GetNamespace(),
		Name:            u.GetName(),
		UID:             u.GetUID(),
		ResourceVersion: u.GetResourceVersion(),
	}
}

// event turns one unstructured watch event into a typed one; ok is false
// for an event to drop.
func (d decoder) event(e watch.Event) (watch.Event, bool) {
	u, isObject := e.Object.(*unstructured.Unstructured)
	if !isObject || e.Type == watch.Error {
		return e, true
	}
	if e.Type == watch.Bookmark {
		// A bookmark carries a resourceVersion (and the end of the
		// initial events of a watch list) and nothing to decode.
		obj := d.stub(u)
		if m, err := meta.Accessor(obj); err == nil {
			m.SetAnnotations(u.GetAnnotations())
		}
		return watch.Event{Type: e.Type, Object: obj}, true
	}
	if e.Type == watch.Deleted {
		// A deletion needs the object's identity only, and an object that
		// is gone is nobody's to fix.
		d.skips.forget(u.GetUID())
		obj, err := d.decode(u)
		if err != nil {
			obj = d.stub(u)
		}
		return watch.Event{Type: e.Type, Object: obj}, true
	}
	obj, err := d.object(u)
	switch {
	case err == nil:
		return watch.Event{Type: e.Type, Object: obj}, true
	case e.Type == watch.Added:
		return e, false
	default:
		// The cache must not keep acting on the last version it could
		// read.
		return watch.Event{Type: watch.Deleted, Object: d.stub(u)}, true
	}
}

// decodingWatch passes on the events of an unstructured watch as typed
// ones.
type decodingWatch struct {
	source  watch.Interface
	result  chan watch.Event
	done    chan struct{}
	stopped sync.Once
}

func newDecodingWatch(source watch.Interface, d decoder) *decodingWatch {
	w := &decodingWatch{source: source, result: make(chan watch.Event), done: make(chan struct{})}
	go w.run(d)
	return w
}

func (w *decodingWatch) run(d decoder) {
	defer close(w.result)
	for e := range w.source.ResultChan() {
		typed, ok := d.event(e)
		if !ok {
			continue
		}
		select {
		case w.result <- typed:
		case <-w.done:
			return
		}
	}
}

// Stop stops the source watch; ResultChan is closed once the events in
// flight are dropped.
func (w *decodingWatch) Stop() {
	w.stopped.Do(func() {
		close(w.done)
		w.source.Stop()
	})
}

// ResultChan returns the typed events.
func (w *decodingWatch) ResultChan() <-chan watch.Event { return w.result }

// ReasonUndecodable is the reason of the Warning event left on an object
// that the operator skips.
const ReasonUndecodable = "Undecodable"

// EventReporter returns a Reporter that leaves a Warning event on each
// skipped object and counts it in metrics.UndecodableObjects under the
// object's resource.
func EventReporter(recorder record.EventRecorder, resource string) Reporter {
	return func(ref *corev1.ObjectReference, err error) {
		metrics.UndecodableObjects.WithLabelValues(resource).Inc()
		recorder.Eventf(ref, corev1.EventTypeWarning, ReasonUndecodable,
			"The operator cannot read this %s as %s and skips it until it can: %v", ref.Kind, ref.APIVersion, err)
	}
}
