package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
)

// The planner's own tests are package elastic's; these check what the v1
// controller hands it.

// workersTestJob returns a defaulted job "ns/job" with replicas workers,
// elastic when ep is not nil.
func workersTestJob(replicas int32, ep *kubeflow.ElasticPolicy) *kubeflow.MPIJob {
	job := newTestJob("job", replicas)
	job.Spec.ElasticPolicy = ep
	return defaulted(job)
}

// TestToWorkers: the workers' indices come from either index label, else
// from the name; a pod with neither is no worker.
func TestToWorkers(t *testing.T) {
	job := workersTestJob(3, nil)
	pods := existingWorkers(job, corev1.PodRunning, 10, 4, 11, 0)
	delete(pods[1].Labels, labelReplicaIndex) // the kubeflow/common label only
	delete(pods[2].Labels, labelReplicaIndex) // the name only
	delete(pods[2].Labels, common.ReplicaIndexLabel)
	pods[3].Name = "stranger" // neither
	delete(pods[3].Labels, labelReplicaIndex)
	delete(pods[3].Labels, common.ReplicaIndexLabel)
	var got []string
	for _, w := range toWorkers(job, pods) {
		if w.Pod.Name != workerName(job, w.Index) {
			t.Errorf("%s parsed as index %d", w.Pod.Name, w.Index)
		}
		got = append(got, w.Pod.Name)
	}
	if diff := cmp.Diff([]string{"job-worker-4", "job-worker-10", "job-worker-11"}, got); diff != "" {
		t.Errorf("toWorkers (-want +got):\n%s", diff)
	}
}

func TestWorkerSpec(t *testing.T) {
	fixed := workerSpec(workersTestJob(3, nil))
	if fixed.Elastic || fixed.Replicas != 3 || fixed.DrainPeriod != 30*time.Second || fixed.Listable != nil {
		t.Errorf("fixed job's spec %+v", fixed)
	}
	el := workerSpec(workersTestJob(2, &kubeflow.ElasticPolicy{DrainSeconds: ptr[int32](7)}))
	if !el.Elastic || el.Replicas != 2 || el.DrainPeriod != 7*time.Second || el.Listable != nil {
		t.Errorf("elastic job's spec %+v", el)
	}
	if got := el.WorkerName(12); got != "job-worker-12" {
		t.Errorf("WorkerName(12) = %q", got)
	}
}

func TestDrainPeriodAndDesiredWorkers(t *testing.T) {
	if got := drainPeriod(workersTestJob(1, nil)); got != 30*time.Second {
		t.Errorf("fixed job drain period %v, want 30s", got)
	}
	if got := drainPeriod(workersTestJob(1, &kubeflow.ElasticPolicy{DrainSeconds: ptr[int32](7)})); got != 7*time.Second {
		t.Errorf("elastic drainSeconds 7: %v, want 7s", got)
	}
	if got := drainPeriod(workersTestJob(1, &kubeflow.ElasticPolicy{})); got != 30*time.Second {
		t.Errorf("elastic default drain period %v, want 30s", got)
	}
	if got := desiredWorkers(workersTestJob(5, nil)); got != 5 {
		t.Errorf("desiredWorkers = %d, want 5", got)
	}
	noWorker := workersTestJob(5, nil)
	delete(noWorker.Spec.MPIReplicaSpecs, kubeflow.MPIReplicaTypeWorker)
	if got := desiredWorkers(noWorker); got != 0 {
		t.Errorf("desiredWorkers without a Worker spec = %d, want 0", got)
	}
}
