package engine

import (
	"sync"
	"time"
)

// StatusBatchPeriod is how long a status change that StatusHold may hold
// (the replica counts or the Resizing condition alone) waits before it is
// written, as the Job controller batches its pods' updates: the workers of
// a resize change phase one after another, and the status then reaches the
// API server in one write rather than one each; a resize that settles
// within the period costs one write, with the Resizing condition come and
// gone. A change of another condition, or of anything else, is written at
// once, with the rest.
const StatusBatchPeriod = time.Second

// StatusHold remembers, per job, since when a status change that may wait
// has waited to be written. Both operators hold their status writes
// through it.
type StatusHold struct{ since sync.Map } // job key -> time.Time

// Wait tells how long the status write of key may still wait at now:
// zero when it is due. mayWait tells whether the write changes only what
// may wait; any other write is due at once. The wait of a job starts with
// the first such change and ends when its status is written (Forget).
func (h *StatusHold) Wait(key string, now time.Time, mayWait bool) time.Duration {
	if !mayWait {
		return 0
	}
	v, _ := h.since.LoadOrStore(key, now)
	return max(v.(time.Time).Add(StatusBatchPeriod).Sub(now), 0)
}

// Write writes status, the status of job key, through write, unless it
// has not changed from old (StatusChange) or its change may wait and has
// waited less than StatusBatchPeriod; it returns how long until such a
// change is due. old and status are pointers to a JobStatus of either API.
func (h *StatusHold) Write(key string, now time.Time, old, status any, write func() error) (time.Duration, error) {
	changed, mayWait := StatusChange(old, status)
	return h.write(key, now, changed, mayWait, write)
}

// write is Write once the change is known: changed tells whether there is
// one, mayWait whether it may wait.
func (h *StatusHold) write(key string, now time.Time, changed, mayWait bool, write func() error) (time.Duration, error) {
	if !changed {
		h.Forget(key)
		return 0, nil
	}
	if wait := h.Wait(key, now, mayWait); wait > 0 {
		return wait, nil
	}
	if err := write(); err != nil {
		return 0, err
	}
	h.Forget(key)
	return 0, nil
}

// Forget ends key's wait: the status was written, has nothing to write, or
// the job is gone.
func (h *StatusHold) Forget(key string) { h.since.Delete(key) }

// Holds tells whether a change of key is waiting.
func (h *StatusHold) Holds(key string) bool {
	_, ok := h.since.Load(key)
	return ok
}
