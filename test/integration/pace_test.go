package integration

import (
	"context"
	"testing"
	"time"

	"github.com/kubeflow/mpi-operator/pkg/controller"
	"github.com/kubeflow/mpi-operator/test/harness"
)

// TestFlappingJobKeepsItsPace: a job whose replicas flap every 50 ms
// between 1 and 4 for two seconds writes its ConfigMap and Role at no more
// than the controller's pace (here 4 KiB/s) beyond one write of each, holds
// back syncs to do so, deletes no listed worker, and ends as the last
// change asks.
func TestFlappingJobKeepsItsPace(t *testing.T) {
	const rate = 4 << 10
	ns := env.Namespace(t)
	startController(t, controller.Config{Namespace: ns, WriteBytesPerSecond: rate})
	createJob(t, elasticJob(ns, "pace", 4, 1, 4, 1))
	for _, w := range namesOf("pace", 0, 1, 2, 3) {
		waitForRunning(t, ns, w)
	}
	waitForHosts(t, ns, "pace", hostsOf("pace", 0, 1, 2, 3)...)
	checkNoDeletionWhileListed(t, ns, "pace")
	writes, err := harness.RecordWrites(context.Background(), env.Kube, ns, "pace-config", "pace-launcher")
	if err != nil {
		t.Fatalf("watching the ConfigMap and Role: %v", err)
	}
	defer writes.Stop()

	start := harness.Flap(func(n int32) { patchWorkers(t, ns, "pace", n) }, 1, 4, 40, 50*time.Millisecond)
	patchWorkers(t, ns, "pace", 2)
	harness.Eventually(t, poll, waitTimeout, "two Running workers listed and the others gone", func() (bool, error) {
		return len(discoveredHosts(t, ns, "pace")) == 2 && len(workerPods(t, ns, "pace")) == 2, nil
	})
	writes.Stop()

	writes.CheckPace(t, start, rate)
}
