package reconcile

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
)

// ExpectationsTimeout bounds how long a job waits for the informer to show
// its own object changes; past it, a missed event cannot stall the job.
const ExpectationsTimeout = 30 * time.Second

// Expectations remember, per job, the objects (pods, typically) the
// controller created, changed or deleted that the informer has not shown
// since. Until it has, a sync that reads the cache would make the same
// change again, so the job's changes wait; the informer event that settles
// them enqueues the job. Jobs are told apart by a key of the caller's, such
// as "namespace/name". It is memory only: after a restart the cache is
// fresh and there is nothing to wait for. It is safe for concurrent use.
//
// Set an expectation before the request that makes the change, since the
// informer's event may come before the request returns, and drop it when
// the request fails: no event will come for it.
type Expectations struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	jobs  map[string]*pending
}

// pending is what one job waits for.
type pending struct {
	creates sets.Set[string] // names of objects created
	// changes are the objects patched or deleted, each with the test that a
	// state of the object shows the change.
	changes map[types.UID]func(metav1.Object) bool
	since   time.Time
}

// NewExpectations returns expectations that time out on clk.
func NewExpectations(clk clock.PassiveClock) *Expectations {
	return &Expectations{clock: clk, jobs: map[string]*pending{}}
}

// entry returns the job's pending changes, created if missing, with the
// wait restarted.
func (e *Expectations) entry(key string) *pending {
	p := e.jobs[key]
	if p == nil {
		p = &pending{creates: sets.New[string](), changes: map[types.UID]func(metav1.Object) bool{}}
		e.jobs[key] = p
	}
	p.since = e.clock.Now()
	return p
}

// ExpectCreate records that the controller created the object name for job
// key.
func (e *Expectations) ExpectCreate(key, name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.entry(key).creates.Insert(name)
}

// ExpectChange records that the controller patched or deleted the object
// with uid for job key; shows tells whether a state of the object includes
// that change.
func (e *Expectations) ExpectChange(key string, uid types.UID, shows func(metav1.Object) bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.entry(key).changes[uid] = shows
}

// ObserveCreate is called when the informer shows the object name of job
// key, and when a request to create it failed.
func (e *Expectations) ObserveCreate(key, name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p := e.jobs[key]; p != nil {
		p.creates.Delete(name)
		e.forgetIfDone(key, p)
	}
}

// Observe is called for every state of an object of job key that the
// informer shows. An expected change is settled only by a state that
// includes it: an update event that was on its way before the change was
// made does not count. It reports whether the state settled the last
// change the job waited for, so that the job is no longer Changing: the
// work that waited for it (the files) should follow at once.
func (e *Expectations) Observe(key string, obj metav1.Object) (settled bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p := e.jobs[key]; p != nil {
		if shows, ok := p.changes[obj.GetUID()]; ok && shows(obj) {
			return e.settle(key, p, obj.GetUID())
		}
	}
	return false
}

// ObserveGone is called when the object with uid is deleted, and when a
// request to change it failed: either way, no later state will come. It
// reports what Observe does.
func (e *Expectations) ObserveGone(key string, uid types.UID) (settled bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p := e.jobs[key]; p != nil {
		if _, ok := p.changes[uid]; ok {
			return e.settle(key, p, uid)
		}
	}
	return false
}

// settle drops the expected change of uid and tells whether it was the
// job's last.
func (e *Expectations) settle(key string, p *pending, uid types.UID) bool {
	delete(p.changes, uid)
	e.forgetIfDone(key, p)
	return len(p.changes) == 0
}

func (e *Expectations) forgetIfDone(key string, p *pending) {
	if p.creates.Len() == 0 && len(p.changes) == 0 {
		delete(e.jobs, key)
	}
}

// Satisfied reports whether the cache shows every change made for job key,
// or the wait for it has timed out.
func (e *Expectations) Satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.jobs[key]
	if p == nil {
		return true
	}
	if e.clock.Since(p.since) > ExpectationsTimeout {
		delete(e.jobs, key)
		return true
	}
	return false
}

// Changing reports whether the cache has yet to show objects the controller
// patched or deleted for job key, within the wait for them. Created objects
// the cache does not show yet do not count.
func (e *Expectations) Changing(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.jobs[key]
	return p != nil && len(p.changes) > 0 && e.clock.Since(p.since) <= ExpectationsTimeout
}

// Seen is what the expectations told of a job at one moment.
//
// A sync takes it before it reads the job's pods from the cache, as the
// Job controller reads its expectations before it lists a job's pods: the
// pods read afterwards show at least every write that Seen counts as shown.
// Expectations read after the pods may count writes whose events arrived in
// between, and a sync that trusted them would act on pods that lack those
// writes: create a worker that exists, or name in the files and the
// launcher's Role a set of workers that misses some.
type Seen struct {
	// Settled: the cache showed every write of the controller's for the
	// job, or the wait for them had timed out (Satisfied).
	Settled bool
	// Changing: it had yet to show objects the controller patched or
	// deleted (Changing).
	Changing bool
}

// Seen tells whether job key is Satisfied and whether it is Changing.
func (e *Expectations) Seen(key string) Seen {
	return Seen{Settled: e.Satisfied(key), Changing: e.Changing(key)}
}

// SettledSince tells whether job key, as seen before a sync read its pods,
// is still settled: the pod writes that the sync made since count too.
func (e *Expectations) SettledSince(seen Seen, key string) bool {
	return seen.Settled && e.Satisfied(key)
}

// ChangingSince tells whether job key, as seen before a sync read its
// pods, was changing or has begun to change since: by the sync's own
// patches and deletions too.
func (e *Expectations) ChangingSince(seen Seen, key string) bool {
	return seen.Changing || e.Changing(key)
}

// Forget drops what is expected of a job, when it is gone.
func (e *Expectations) Forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.jobs, key)
}

// Holds tells whether anything is expected of job key.
func (e *Expectations) Holds(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.jobs[key] != nil
}

// ShowsAnnotation is the test of a change that sets annotation name to
// value.
func ShowsAnnotation(name, value string) func(metav1.Object) bool {
	return func(obj metav1.Object) bool { return obj.GetAnnotations()[name] == value }
}

// ShowsDeletion is the test of a deletion: the object is terminating.
func ShowsDeletion(obj metav1.Object) bool { return obj.GetDeletionTimestamp() != nil }
