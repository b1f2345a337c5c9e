package integration

import (
	"context"
	"testing"
	"time"

	"github.com/kubeflow/mpi-operator/test/harness"
	"github.com/kubeflow/mpi-operator/v2/pkg/controller"
)

// TestFlappingJobKeepsItsPace: a job whose replicas flap every 50 ms
// between 1 and 4 for two seconds writes its ConfigMap at no more than the
// controller's pace (here 4 KiB/s) beyond one write, holds back syncs to do
// so, deletes no listed worker, and ends as the last change asks. It runs
// alone, so that the count of held syncs is its own.
func TestFlappingJobKeepsItsPace(t *testing.T) {
	const rate = 4 << 10
	ns := suite.Namespace(t)
	h := recordHistory(t, ns)
	runController(t, nil, controller.Config{Namespace: ns, WriteBytesPerSecond: rate})
	createJob(t, elasticJob(ns, "pace", 4, 1, 4, 1))
	runningWorkers(t, ns, "pace", 4)
	harness.Eventually(t, poll, waitTimeout, "four workers listed", func() (bool, error) { return len(listedWorkers(t, ns, "pace")) == 4, nil })
	writes, err := harness.RecordWrites(context.Background(), suite.Kube, ns, "pace-config", "")
	if err != nil {
		t.Fatalf("watching the ConfigMap: %v", err)
	}
	defer writes.Stop()

	start := harness.Flap(func(n int32) { scaleJob(t, ns, "pace", n) }, 1, 4, 40, 50*time.Millisecond)
	scaleJob(t, ns, "pace", 2)
	harness.Eventually(t, poll, waitTimeout, "two workers listed and the others gone", func() (bool, error) {
		return len(listedWorkers(t, ns, "pace")) == 2 && len(workerPods(t, ns, "pace", false)) == 2, nil
	})
	writes.Stop()

	writes.CheckPace(t, start, rate)
	h.finish()
	h.checkWorkerOrder("pace")
}
