package reconcile

import (
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// Limits of the health check. A liveness probe that fails restarts the
// operator, which is the cure for a controller that no longer makes
// progress; the limits are far above what a working controller needs, so
// that a slow API server does not cause restarts.
const (
	// CacheSyncGrace is how long the informer caches may take to fill once
	// the controller starts. Listing every pod of a large cluster takes
	// seconds; minutes mean that the API server refuses or cannot serve
	// the lists.
	CacheSyncGrace = 2 * time.Minute
	// StallTimeout is how long one sync may run, and how long work may wait
	// in the queue while no sync starts or finishes. A sync makes a few
	// dozen API requests; minutes mean that it, or the workers, hang.
	StallTimeout = 3 * time.Minute
)

// Health is what a controller tells /healthz about its progress: its Run
// calls Starting, then CachesSynced once the caches have synced, and its
// workers call SyncStarted and SyncFinished around every sync of the main
// queue. It holds only atomics: a probe never makes a worker wait, nor a
// worker a probe.
//
// Moments are kept as nanoseconds since base, plus one so that zero means
// "not yet". A real clock's readings then differ by its monotonic clock, and
// a step of the wall clock cannot fake a hang.
type Health struct {
	clock    clock.PassiveClock
	base     time.Time
	queueLen func() int

	startedAt atomic.Int64 // Starting was called
	syncedAt  atomic.Int64 // the caches synced and the workers started
	// progress is the latest moment the workers started working: a sync
	// started or finished, or the workers themselves started.
	progress atomic.Int64
	// running holds, per worker, the moment its current sync started, or
	// zero while it waits for work. Starting sizes it before the workers
	// start, so there is always a free slot for a worker's sync.
	running atomic.Pointer[[]atomic.Int64]
}

// NewHealth returns the health of a controller that has not started yet
// and whose main work queue holds queueLen() items ready for a worker.
func NewHealth(clk clock.PassiveClock, queueLen func() int) *Health {
	return &Health{clock: clk, base: clk.Now(), queueLen: queueLen}
}

// moment converts a time of the clock to the form the fields hold.
func (h *Health) moment(t time.Time) int64 {
	return max(int64(t.Sub(h.base)), 0) + 1
}

// since is how long before now the moment m was.
func (h *Health) since(now time.Time, m int64) time.Duration {
	return time.Duration(h.moment(now) - m)
}

// Starting records that the controller starts and will run workers
// workers once its caches have synced.
func (h *Health) Starting(workers int) {
	slots := make([]atomic.Int64, max(workers, 0))
	h.running.Store(&slots)
	h.startedAt.Store(h.moment(h.clock.Now()))
}

// CachesSynced records that the caches synced and the workers start.
func (h *Health) CachesSynced() {
	m := h.moment(h.clock.Now())
	h.progress.Store(m)
	h.syncedAt.Store(m)
}

// SyncStarted records the start of a sync and returns the slot to pass to
// SyncFinished: -1 when no slot was free, which happens only when syncs run
// outside the workers Starting counted, as in tests.
func (h *Health) SyncStarted() int {
	m := h.moment(h.clock.Now())
	h.progress.Store(m)
	slots := h.running.Load()
	if slots == nil {
		return -1
	}
	for i := range *slots {
		if (*slots)[i].CompareAndSwap(0, m) {
			return i
		}
	}
	return -1
}

// SyncFinished records the end of the sync that SyncStarted gave slot.
func (h *Health) SyncFinished(slot int) {
	h.progress.Store(h.moment(h.clock.Now()))
	if slot >= 0 {
		(*h.running.Load())[slot].Store(0)
	}
}

// oldestSync returns the start of the longest-running sync, if any runs.
func (h *Health) oldestSync() (int64, bool) {
	slots := h.running.Load()
	if slots == nil {
		return 0, false
	}
	var oldest int64
	for i := range *slots {
		if m := (*slots)[i].Load(); m != 0 && (oldest == 0 || m < oldest) {
			oldest = m
		}
	}
	return oldest, oldest != 0
}

// Healthy returns nil unless the controller is stuck at now, and otherwise
// a one-line reason. A controller that has not started, such as one whose
// replica stands by for the leader Lease, is healthy. A started one is
// stuck when its caches have not synced within CacheSyncGrace, when a sync
// has run for longer than StallTimeout, or when work waits while no sync
// started or finished for longer than StallTimeout. The last can misjudge
// only the instant between work arriving at a long-idle controller and a
// waiting worker taking it; a probe fails a pod only after several failures
// in a row.
func (h *Health) Healthy(now time.Time) error {
	started := h.startedAt.Load()
	if started == 0 {
		return nil
	}
	if h.syncedAt.Load() == 0 {
		return h.checkCacheSync(now, started)
	}
	if err := h.checkSyncs(now); err != nil {
		return err
	}
	return h.checkQueue(now)
}

// checkCacheSync is the check of a controller that started at the moment
// started and whose caches have not synced.
func (h *Health) checkCacheSync(now time.Time, started int64) error {
	if waited := h.since(now, started); waited > CacheSyncGrace {
		return fmt.Errorf("the informer caches have not synced %v after the controller started (limit %v)",
			waited.Round(time.Second), CacheSyncGrace)
	}
	return nil
}

// checkSyncs reports a sync that has run for too long.
func (h *Health) checkSyncs(now time.Time) error {
	if oldest, ok := h.oldestSync(); ok {
		if ran := h.since(now, oldest); ran > StallTimeout {
			return fmt.Errorf("a sync of an MPIJob has been running for %v (limit %v)",
				ran.Round(time.Second), StallTimeout)
		}
	}
	return nil
}

// checkQueue reports work that waits while no sync starts or finishes.
func (h *Health) checkQueue(now time.Time) error {
	if n := h.queueLen(); n > 0 {
		if idle := h.since(now, h.progress.Load()); idle > StallTimeout {
			return fmt.Errorf("%d MPIJob(s) wait in the work queue, but no sync has started or finished for %v (limit %v)",
				n, idle.Round(time.Second), StallTimeout)
		}
	}
	return nil
}
