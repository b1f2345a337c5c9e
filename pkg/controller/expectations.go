package controller

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
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
	creates sets.Set[string] // names of pods created
	// changes are the pods patched or deleted, each with the test that a
	// state of the pod shows the change.
	changes map[types.UID]func(*corev1.Pod) bool
	since   time.Time
}

func newPodExpectations(clk clock.PassiveClock) *podExpectations {
	return &podExpectations{clock: clk, jobs: map[string]*pending{}}
}

func (e *podExpectations) entry(key string) *pending {
	p := e.jobs[key]
	if p == nil {
		p = &pending{creates: sets.New[string](), changes: map[types.UID]func(*corev1.Pod) bool{}}
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
// with uid; shows tells whether a state of the pod includes that change.
func (e *podExpectations) expectChange(key string, uid types.UID, shows func(*corev1.Pod) bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.entry(key).changes[uid] = shows
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

// observePod is called for every state of a pod of job key that the
// informer shows. An expected change is settled only by a state that
// includes it: an update event that was on its way before the change was
// made does not count.
func (e *podExpectations) observePod(key string, pod *corev1.Pod) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p := e.jobs[key]; p != nil {
		if shows, ok := p.changes[pod.UID]; ok && shows(pod) {
			delete(p.changes, pod.UID)
			e.forgetIfDone(key, p)
		}
	}
}

// observeGone is called when the pod with uid is deleted, and when a
// request to change it failed: either way, no later state will come.
func (e *podExpectations) observeGone(key string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p := e.jobs[key]; p != nil {
		delete(p.changes, uid)
		e.forgetIfDone(key, p)
	}
}

func (e *podExpectations) forgetIfDone(key string, p *pending) {
	if p.creates.Len() == 0 && len(p.changes) == 0 {
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
	return p != nil && len(p.changes) > 0 && e.clock.Since(p.since) <= expectationsTimeout
}

// forget drops what is expected of a job, when it is gone.
func (e *podExpectations) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.jobs, key)
}

// showsAnnotation is the test of a change that sets an annotation.
func showsAnnotation(name, value string) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool { return p.Annotations[name] == value }
}

// showsDeletion is the test of a deletion: the pod is terminating.
func showsDeletion(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }
