package controller

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
)

func TestSyncCutShortByTheStopIsNotRetried(t *testing.T) {
	f := newFixture(t)
	job := newTestJob("pi", 1)
	f.jobs = append(f.jobs, job)
	// A ConfigMap the job does not control makes its sync fail.
	f.cms = append(f.cms, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pi-config", Namespace: "ns"}})
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	key := jobKey(job)

	c.Queue.Add(key)
	c.ProcessNext(ctx, c.syncHandler)
	if got := c.Queue.NumRequeues(key); got != 1 {
		t.Fatalf("a failed sync was retried %d times, want 1", got)
	}
	c.Queue.Forget(key)

	stopped, cancel := context.WithCancel(ctx)
	cancel()
	c.Queue.Add(key)
	c.ProcessNext(stopped, c.syncHandler)
	if got := c.Queue.NumRequeues(key); got != 0 {
		t.Errorf("a sync failed during the stop was retried %d times, want 0", got)
	}
}
