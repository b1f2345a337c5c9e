package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"

	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

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
	// Once Run has started, the caches' grace period runs.
	waitUntil(t, "Run to start", func() bool {
		return c.Health.Healthy(f.clock.Now().Add(reconcile.CacheSyncGrace+time.Second)) != nil
	})

	f.clock.Step(reconcile.CacheSyncGrace)
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

// TestSyncsRecordProgress checks the hook of the queue: a hung sync is
// reported while it runs, and each sync is progress.
func TestSyncsRecordProgress(t *testing.T) {
	f := newFixture(t)
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	c.Health.Starting(1)
	c.Health.CachesSynced()

	// Jobs that do not exist: their syncs only forget them.
	c.Queue.Add("ns/first")
	c.Queue.Add("ns/second")
	f.clock.Step(reconcile.StallTimeout + time.Second)
	if err := c.Healthy(); err == nil || !strings.Contains(err.Error(), "2 MPIJob(s) wait in the work queue") {
		t.Fatalf("Healthy() with work and no sync = %v, want the queue reported", err)
	}
	c.ProcessNext(ctx, c.syncHandler)
	if err := c.Healthy(); err != nil {
		t.Errorf("Healthy() right after a sync = %v, want nil", err)
	}

	// A sync that waits for release hangs.
	release := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.ProcessNext(ctx, func(ctx context.Context, key string) (time.Duration, error) {
			<-release
			return c.syncHandler(ctx, key)
		})
	}()
	// Once the sync has started, it is the one reported, not the queue.
	waitUntil(t, "the sync to start", func() bool {
		err := c.Health.Healthy(f.clock.Now().Add(reconcile.StallTimeout + time.Second))
		return err != nil && strings.Contains(err.Error(), "has been running")
	})
	f.clock.Step(reconcile.StallTimeout + time.Second)
	if err := c.Healthy(); err == nil || !strings.Contains(err.Error(), "has been running for 3m1s") {
		t.Errorf("Healthy() during a hung sync = %v, want the sync reported", err)
	}
	close(release)
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
