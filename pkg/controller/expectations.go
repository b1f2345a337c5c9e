package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
)

// expectationsTimeout bounds how long a job waits for the informer to show
// its own pod changes; past it, a missed event cannot stall the job.
const expectationsTimeout = 30 * time.Second

// podExpectations remember, per job, the pods the controller created,
// changed or deleted that the informer has not shown since. Until it has, a
// sync that reads the cache would make the same change again, so the job's
// pod changes wait; the informer event that settles them enqueues the job.
// It is memory only: after a restart the cache is fresh and there is
// nothing to wait for.
type podExpectations struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	jobs  map[string]*pending
}

type pending struct {
	creates sets.Set[string]    // names of pods created
	changes sets.Set[types.UID] // pods patched or deleted
	since   time.Time
}

func newPodExpectations(clk clock.PassiveClock) *podExpectations {
	return &podExpectations{clock: clk, jobs: map[string]*pending{}}
}

func (e *podExpectations) entry(key string) *pending {
	p := e.jobs[key]
	if p == nil {
		p = &pending{creates: sets.New[string](), changes: sets.New[types.UID]()}
		e.jobs[key] = p
	}
	p.since = e.clock.Now()
	return p
}

// expectCreate records that the controller created pod name for job key.
func (e *podExpectations) expectCreate(key, name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.entry(key).creates.Insert(name)
}

// expectChange records that the controller patched or deleted the pod
// with uid.
func (e *podExpectations) expectChange(key string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.entry(key).changes.Insert(uid)
}

// observeCreate is called when the informer shows pod name of job key.
func (e *podExpectations) observeCreate(key, name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p := e.jobs[key]; p != nil {
		p.creates.Delete(name)
		e.forgetIfDone(key, p)
	}
}

// observeChange is called for every update or deletion of the pod with
// uid that the informer shows: events come in order, so the first one after
// the controller's own change shows that change or a later state.
func (e *podExpectations) observeChange(key string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p := e.jobs[key]; p != nil {
		p.changes.Delete(uid)
		e.forgetIfDone(key, p)
	}
}

func (e *podExpectations) forgetIfDone(key string, p *pending) {
	if p.creates.Len() == 0 && p.changes.Len() == 0 {
		delete(e.jobs, key)
	}
}

// satisfied reports whether the cache shows every pod change made for job
// key, or the wait for it has timed out.
func (e *podExpectations) satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.jobs[key]
	if p == nil {
		return true
	}
	if e.clock.Since(p.since) > expectationsTimeout {
		delete(e.jobs, key)
		return true
	}
	return false
}

// changing reports whether the cache has yet to show pods the controller
// patched or deleted for job key, within the wait for them.
func (e *podExpectations) changing(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.jobs[key]
	return p != nil && p.changes.Len() > 0 && e.clock.Since(p.since) <= expectationsTimeout
}

// forget drops what is expected of a job, when it is gone.
func (e *podExpectations) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.jobs, key)
}
