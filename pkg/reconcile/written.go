package reconcile

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// Written lays a controller's own last writes of one kind of object over
// its informer's cache, for the moment the cache has yet to show them. A
// sync that follows its job's previous one at once (an urgent change, a
// sync that gave way, the event of another child) would otherwise start
// from the version before that sync's write: plan from files a step old,
// update from a resourceVersion that can only conflict, or create again an
// object it has just created.
//
// A read returns the controller's write while the cache holds an older
// version of the object, or holds none of it and the write created it. The write is
// forgotten once the informer shows it or a newer version (Events), or the
// deletion of that object, and at the latest after ExpectationsTimeout: so
// an update never brings a deleted object back, and a created one stays
// only until its deletion is seen. Versions compare as integers, as
// etcd's are.
type Written[T metav1.Object] struct {
	resource schema.GroupResource
	store    cache.Store
	clock    clock.PassiveClock

	mu     sync.Mutex
	writes map[string]write[T]
}

// write is one of the controller's writes, kept until the cache shows it.
type write[T metav1.Object] struct {
	obj     T
	created bool
	at      time.Time
}

// NewWritten returns a Written over store, the cache of an informer of
// resource, whose events must reach Events.
func NewWritten[T metav1.Object](_ context.Context, resource schema.GroupResource, store cache.Store) *Written[T] {
	return &Written[T]{resource: resource, store: store, clock: clock.RealClock{}, writes: map[string]write[T]{}}
}

// Get returns the object of the given name: the cache's, or the
// controller's last write of it when that is newer. It must not be
// modified.
func (w *Written[T]) Get(namespace, name string) (T, error) {
	var zero T
	key := namespace + "/" + name
	obj, exists, err := w.store.GetByKey(key)
	if err != nil {
		return zero, err
	}
	w.mu.Lock()
	mine, ok := w.writes[key]
	if ok && w.clock.Since(mine.at) > ExpectationsTimeout {
		delete(w.writes, key)
		ok = false
	}
	w.mu.Unlock()
	switch {
	case !exists && ok && mine.created:
		return mine.obj, nil
	case !exists:
		return zero, apierrors.NewNotFound(w.resource, name)
	}
	cached, isT := obj.(T)
	if !isT {
		return zero, fmt.Errorf("%s %s: cached as %T", w.resource, key, obj)
	}
	if ok && mine.obj.GetUID() == cached.GetUID() && newer(mine.obj, cached) {
		return mine.obj, nil
	}
	return cached, nil
}

// record remembers a write the API server accepted.
func (w *Written[T]) record(obj T, created bool) {
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, mine := range w.writes {
		if now.Sub(mine.at) > ExpectationsTimeout {
			delete(w.writes, key)
		}
	}
	w.writes[obj.GetNamespace()+"/"+obj.GetName()] = write[T]{obj: obj, created: created, at: now}
}

// Events are the handlers that forget a write once the informer shows it,
// a newer version of the object, or its deletion.
func (w *Written[T]) Events() cache.ResourceEventHandlerFuncs {
	seen := func(obj any, deleted bool) {
		m, ok := Untombstone(obj).(metav1.Object)
		if !ok {
			return
		}
		key := m.GetNamespace() + "/" + m.GetName()
		w.mu.Lock()
		defer w.mu.Unlock()
		mine, ok := w.writes[key]
		if ok && (deleted && mine.obj.GetUID() == m.GetUID() || !newer(mine.obj, m)) {
			delete(w.writes, key)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { seen(obj, false) },
		UpdateFunc: func(_, obj any) { seen(obj, false) },
		DeleteFunc: func(obj any) { seen(obj, true) },
	}
}

// len is how many writes are remembered.
func (w *Written[T]) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.writes)
}

// newer tells whether a's resourceVersion is past b's. A version that is
// not an integer is never newer: the cache is then believed.
func newer(a, b metav1.Object) bool {
	va, errA := strconv.ParseUint(a.GetResourceVersion(), 10, 64)
	vb, errB := strconv.ParseUint(b.GetResourceVersion(), 10, 64)
	return errA == nil && errB == nil && va > vb
}

// Remembering returns ch reading through w, which records every object
// that ch creates or updates, as the API server returned it.
func (ch Child[T]) Remembering(w *Written[T]) Child[T] {
	create, update := ch.Create, ch.Update
	ch.Get = w.Get
	ch.Create = func(ctx context.Context, obj T) (T, error) {
		out, err := create(ctx, obj)
		if err == nil {
			w.record(out, true)
		}
		return out, err
	}
	ch.Update = func(ctx context.Context, obj T) (T, error) {
		out, err := update(ctx, obj)
		if err == nil {
			w.record(out, false)
		}
		return out, err
	}
	return ch
}

// Untombstone returns the object a deletion event is about.
func Untombstone(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}
