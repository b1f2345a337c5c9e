package controller

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
)

// healthWorld is a health on a fake clock and a queue of settable length.
type healthWorld struct {
	h     *health
	clock *clocktesting.FakeClock
	queue atomic.Int64
}

func newHealthWorld() *healthWorld {
	w := &healthWorld{clock: clocktesting.NewFakeClock(testNow)}
	w.h = newHealth(w.clock, func() int { return int(w.queue.Load()) })
	return w
}

// synced starts the controller with workers workers and syncs its caches.
func (w *healthWorld) synced(workers int) {
	w.h.starting(workers)
	w.clock.Step(5 * time.Second)
	w.h.cachesSynced()
}

func (w *healthWorld) step(d time.Duration) { w.clock.Step(d) }

// sync runs one sync of d.
func (w *healthWorld) sync(d time.Duration) {
	slot := w.h.syncStarted()
	w.step(d)
	w.h.syncFinished(slot)
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
				w.h.starting(2)
				w.step(cacheSyncGrace)
			},
		},
		{
			name: "caches not synced within the grace period",
			run: func(w *healthWorld) {
				w.h.starting(2)
				w.step(cacheSyncGrace + time.Second)
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
				w.step(stallTimeout)
			},
		},
		{
			name: "work waiting and no progress since the workers started",
			run: func(w *healthWorld) {
				w.synced(2)
				w.queue.Store(3)
				w.step(stallTimeout + time.Second)
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
				w.h.syncStarted()
				w.step(stallTimeout)
			},
		},
		{
			name: "a hung sync",
			run: func(w *healthWorld) {
				w.synced(1)
				w.h.syncStarted()
				w.step(stallTimeout + time.Second)
			},
			want: "a sync of an MPIJob has been running for 3m1s (limit 3m0s)",
		},
		{
			name: "a hung sync while another worker makes progress",
			run: func(w *healthWorld) {
				w.synced(2)
				w.h.syncStarted()
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
				w.h.syncStarted()
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
				busy := w.h.syncStarted()
				w.sync(time.Minute) // no free slot: counted as progress only
				w.h.syncFinished(busy)
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

// TestControllerHealthFollowsRun runs a controller whose informers never
// sync: it is healthy while the grace period lasts, then reports the caches.
func TestControllerHealthFollowsRun(t *testing.T) {
	f := newFixture(t)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := f.newController(ctx)
	if err := c.Healthy(); err != nil {
		t.Fatalf("Healthy() before Run = %v, want nil", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, 2) }()
	waitUntil(t, "Run to start", func() bool { return c.health.startedAt.Load() != 0 })

	f.clock.Step(cacheSyncGrace)
	if err := c.Healthy(); err != nil {
		t.Errorf("Healthy() within the grace period = %v, want nil", err)
	}
	f.clock.Step(time.Second)
	if err := c.Healthy(); err == nil || !strings.Contains(err.Error(), "informer caches have not synced") {
		t.Errorf("Healthy() after the grace period = %v, want the caches reported", err)
	}
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Run() = nil, want the caches reported as not synced")
		}
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal("Run did not return after the stop")
	}
}

// TestProcessNextWorkItemRecordsProgress checks the hook of the main queue:
// a hung sync is reported while it runs, and each sync is progress.
func TestProcessNextWorkItemRecordsProgress(t *testing.T) {
	f := newFixture(t)
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	c.health.starting(1)
	c.health.cachesSynced()

	// Jobs that do not exist: their syncs only forget them.
	c.queue.Add("ns/first")
	c.queue.Add("ns/second")
	f.clock.Step(stallTimeout + time.Second)
	if err := c.Healthy(); err == nil || !strings.Contains(err.Error(), "2 MPIJob(s) wait in the work queue") {
		t.Fatalf("Healthy() with work and no sync = %v, want the queue reported", err)
	}
	c.processNextWorkItem(ctx)
	if err := c.Healthy(); err != nil {
		t.Errorf("Healthy() right after a sync = %v, want nil", err)
	}

	// The job's lock, held here, makes the next sync hang.
	c.jobLocks.LockKey("ns/second")
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.processNextWorkItem(ctx)
	}()
	waitUntil(t, "the sync to start", func() bool { _, running := c.health.oldestSync(); return running })
	f.clock.Step(stallTimeout + time.Second)
	if err := c.Healthy(); err == nil || !strings.Contains(err.Error(), "has been running for 3m1s") {
		t.Errorf("Healthy() during a hung sync = %v, want the sync reported", err)
	}
	if err := c.jobLocks.UnlockKey("ns/second"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal("the sync did not finish")
	}
	if err := c.Healthy(); err != nil {
		t.Errorf("Healthy() after the sync finished = %v, want nil", err)
	}
}

// waitUntil polls cond for a while, failing the test if it stays false.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, wait.ForeverTestTimeout, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
