package reconcile

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// healthWorld is a health on a fake clock and a queue of settable length.
type healthWorld struct {
	h     *Health
	clock *clocktesting.FakeClock
	queue atomic.Int64
}

func newHealthWorld() *healthWorld {
	w := &healthWorld{clock: clocktesting.NewFakeClock(testNow)}
	w.h = NewHealth(w.clock, func() int { return int(w.queue.Load()) })
	return w
}

// synced starts the controller with workers workers and syncs its caches.
func (w *healthWorld) synced(workers int) {
	w.h.Starting(workers)
	w.clock.Step(5 * time.Second)
	w.h.CachesSynced()
}

func (w *healthWorld) step(d time.Duration) { w.clock.Step(d) }

// sync runs one sync of d.
func (w *healthWorld) sync(d time.Duration) {
	slot := w.h.SyncStarted()
	w.step(d)
	w.h.SyncFinished(slot)
}

func TestHealth(t *testing.T) {
	cases := []struct {
		name string
		// run brings the health into the state to check.
		run func(w *healthWorld)
		// want is a fragment of the reason; empty means healthy.
		want string
	}{
		{
			name: "not started",
			run:  func(w *healthWorld) { w.step(time.Hour) },
		},
		{
			name: "standing by while work is queued",
			run: func(w *healthWorld) {
				w.queue.Store(5)
				w.step(time.Hour)
			},
		},
		{
			name: "caches syncing within the grace period",
			run: func(w *healthWorld) {
				w.h.Starting(2)
				w.step(CacheSyncGrace)
			},
		},
		{
			name: "caches not synced within the grace period",
			run: func(w *healthWorld) {
				w.h.Starting(2)
				w.step(CacheSyncGrace + time.Second)
			},
			want: "the informer caches have not synced 2m1s after the controller started (limit 2m0s)",
		},
		{
			name: "synced and idle for an hour",
			run: func(w *healthWorld) {
				w.synced(2)
				w.step(time.Hour)
			},
		},
		{
			name: "idle for an hour after some syncs",
			run: func(w *healthWorld) {
				w.synced(2)
				w.sync(time.Second)
				w.sync(time.Second)
				w.step(time.Hour)
			},
		},
		{
			name: "work waiting, recent progress",
			run: func(w *healthWorld) {
				w.synced(2)
				w.sync(time.Second)
				w.queue.Store(3)
				w.step(StallTimeout)
			},
		},
		{
			name: "work waiting and no progress since the workers started",
			run: func(w *healthWorld) {
				w.synced(2)
				w.queue.Store(3)
				w.step(StallTimeout + time.Second)
			},
			want: "3 MPIJob(s) wait in the work queue, but no sync has started or finished for 3m1s (limit 3m0s)",
		},
		{
			name: "work waiting and no progress since the last sync",
			run: func(w *healthWorld) {
				w.synced(2)
				w.sync(time.Second)
				w.queue.Store(1)
				w.step(10 * time.Minute)
			},
			want: "1 MPIJob(s) wait in the work queue, but no sync has started or finished for 10m0s",
		},
		{
			name: "a long sync within the limit",
			run: func(w *healthWorld) {
				w.synced(1)
				w.h.SyncStarted()
				w.step(StallTimeout)
			},
		},
		{
			name: "a hung sync",
			run: func(w *healthWorld) {
				w.synced(1)
				w.h.SyncStarted()
				w.step(StallTimeout + time.Second)
			},
			want: "a sync of an MPIJob has been running for 3m1s (limit 3m0s)",
		},
		{
			name: "a hung sync while another worker makes progress",
			run: func(w *healthWorld) {
				w.synced(2)
				w.h.SyncStarted()
				for range 4 {
					w.sync(time.Minute)
				}
			},
			want: "a sync of an MPIJob has been running for 4m0s",
		},
		{
			name: "a hung sync on an empty queue",
			run: func(w *healthWorld) {
				w.synced(3)
				w.sync(time.Second)
				w.h.SyncStarted()
				w.step(time.Hour)
			},
			want: "a sync of an MPIJob has been running for 1h0m0s",
		},
		{
			name: "work resumes after a stall",
			run: func(w *healthWorld) {
				w.synced(2)
				w.queue.Store(3)
				w.step(time.Hour)
				w.sync(time.Second)
				w.queue.Store(2)
			},
		},
		{
			name: "a hung sync finishes",
			run: func(w *healthWorld) {
				w.synced(2)
				w.sync(time.Hour)
			},
		},
		{
			name: "syncs outside the workers' slots",
			run: func(w *healthWorld) {
				w.synced(1)
				busy := w.h.SyncStarted()
				w.sync(time.Minute) // no free slot: counted as progress only
				w.h.SyncFinished(busy)
				w.step(time.Hour)
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newHealthWorld()
			tc.run(w)
			err := w.h.Healthy(w.clock.Now())
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Healthy() = %q, want nil", err)
			case tc.want != "" && err == nil:
				t.Errorf("Healthy() = nil, want an error containing %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("Healthy() = %q, want it to contain %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "\n"):
				t.Errorf("Healthy() = %q, want one line", err)
			}
		})
	}
}

// TestHealthSyncsBeforeStart: syncs run before Starting, as in tests of a
// controller's sync, take no slot and count as progress only.
func TestHealthSyncsBeforeStart(t *testing.T) {
	w := newHealthWorld()
	slot := w.h.SyncStarted()
	if slot != -1 {
		t.Errorf("SyncStarted() before Starting = %d, want -1", slot)
	}
	w.step(time.Hour)
	w.h.SyncFinished(slot)
	if err := w.h.Healthy(w.clock.Now()); err != nil {
		t.Errorf("Healthy() = %v, want nil", err)
	}
}
