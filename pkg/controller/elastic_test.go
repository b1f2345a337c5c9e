package controller

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/engine"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// elasticJob sets up a running elastic job with the given workers Running.
func elasticJob(f *fixture, workers, minReplicas int32) *kubeflow.MPIJob {
	job := runningJob(f, workers)
	job.Spec.ElasticPolicy = &kubeflow.ElasticPolicy{MinReplicas: ptr(minReplicas), MaxReplicas: ptr[int32](8)}
	// The ConfigMap as the controller leaves it for an elastic job.
	f.cms[0].Annotations = elastic.State{NextIndex: int(workers)}.Annotations()
	return job
}

func TestElasticReplacesFailedWorkerUnderNewName(t *testing.T) {
	f := newFixture(t)
	job := elasticJob(f, 2, 1)
	f.pods[1].Status.Phase = corev1.PodFailed
	f.pods[1].Status.Reason = "Evicted"

	f.syncCountsDue(job)
	f.expectKubeWrites(
		update("configmaps", "pi-config"),
		update("roles", "pi-launcher"),
		patchPod("pi-launcher"),
		// Created once the sync has released the job's lock, and then
		// the failed worker marked replaced by it.
		create("pods", "pi-worker-2"),
		patchPod("pi-worker-1"),
	)
	cm := f.expectListed("pi-worker-0")
	if got := cm.Annotations[elastic.AnnotationNextWorkerIndex]; got != "2" {
		t.Errorf("next worker index %q, want 2 until worker 2 exists", got)
	}
	role := updatedObject[*rbacv1.Role](f, "roles", "pi-launcher")
	if diff := cmp.Diff([]string{"pi-worker-0", "pi-worker-2"}, role.Rules[1].ResourceNames); diff != "" {
		t.Errorf("exec resourceNames (-want +got):\n%s", diff)
	}
	st := f.writtenStatus()
	if !conditions.Has(st.Conditions, common.JobRunning) || conditions.Finished(st.Conditions) {
		t.Errorf("conditions %+v, want still Running", st.Conditions)
	}
	if !conditions.Has(st.Conditions, conditionResizing) {
		t.Errorf("conditions %+v lack Resizing", st.Conditions)
	}
	if !slices.Contains(f.events(), "Warning WorkerReplaced Worker pi-worker-1 ended (Evicted) and is out of discover_hosts.sh; replaced by pi-worker-2") {
		t.Error("no WorkerReplaced event")
	}
}

func TestElasticGrowthUsesRecordedIndex(t *testing.T) {
	f := newFixture(t)
	job := elasticJob(f, 2, 1)
	f.cms[0].Annotations = elastic.State{NextIndex: 5}.Annotations()
	job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas = ptr[int32](3)
	f.sync(job)
	// The hostfile's new name waits for the write that lists the worker.
	f.expectKubeWrites(update("roles", "pi-launcher"), create("pods", "pi-worker-5"))
}

func TestElasticBelowMinReplicasStartsClock(t *testing.T) {
	f := newFixture(t)
	job := elasticJob(f, 3, 3)
	job.Spec.ElasticPolicy.MinReplicasTimeoutSeconds = ptr[int32](120)
	f.pods[2].Status.Phase = corev1.PodFailed

	if d := f.syncCountsDue(job); d != 120*time.Second {
		t.Errorf("requeue = %v, want the 120s timeout", d)
	}
	cm := updatedObject[*corev1.ConfigMap](f, "configmaps", "pi-config")
	if got := cm.Annotations[elastic.AnnotationBelowMinSince]; got != testNow.Format(time.RFC3339) {
		t.Errorf("below-min annotation %q, want %s", got, testNow.Format(time.RFC3339))
	}
	st := f.writtenStatus()
	if conditions.Finished(st.Conditions) {
		t.Errorf("job finished below min before its timeout: %+v", st.Conditions)
	}
}

func TestElasticBelowMinReplicasTooLongFails(t *testing.T) {
	f := newFixture(t)
	job := elasticJob(f, 2, 2)
	job.Spec.ElasticPolicy.MinReplicasTimeoutSeconds = ptr[int32](60)
	since := testNow.Add(-61 * time.Second)
	f.cms[0].Annotations = elastic.State{NextIndex: 3, BelowMinSince: since}.Annotations()
	f.pods[1].Status.Phase = corev1.PodFailed
	f.pods[1].Annotations = map[string]string{elastic.AnnotationReplacedBy: "pi-worker-2"}
	pending := existingWorkers(job, corev1.PodPending, 2)
	f.pods = append(f.pods, pending...)

	st, _ := f.syncRecordingEnd(job)
	// Stopped: the discovery script empties, then every active pod goes.
	f.expectKubeWrites(update("configmaps", "pi-config"), del("pods", "pi-worker-0"), del("pods", "pi-worker-2"), del("pods", "pi-launcher"))
	expectConditionTrue(t, st, common.JobFailed, reasonWorkersBelowMinimum, "minReplicasTimeoutSeconds (60s)")
	if conditions.Has(st.Conditions, conditionResizing) {
		t.Errorf("a failed job is still Resizing: %+v", st.Conditions)
	}
}

func TestElasticRecoveryStopsClock(t *testing.T) {
	f := newFixture(t)
	job := elasticJob(f, 2, 2)
	f.cms[0].Annotations = elastic.State{NextIndex: 2, BelowMinSince: testNow.Add(-10 * time.Second)}.Annotations()
	f.sync(job)
	f.expectKubeWrites(update("configmaps", "pi-config"))
	cm := updatedObject[*corev1.ConfigMap](f, "configmaps", "pi-config")
	if _, ok := cm.Annotations[elastic.AnnotationBelowMinSince]; ok {
		t.Errorf("below-min annotation kept after recovery: %v", cm.Annotations)
	}
}

func TestResizingConditionClearsWhenSettled(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 2)
	setCondition(&job.Status, conditionResizing, reasonResizing, "MPIJob ns/pi is resizing to 2 worker(s).", job.Status.Conditions[0].LastTransitionTime)
	f.syncCountsDue(job)
	f.expectKubeWrites()
	st := f.writtenStatus()
	if conditions.Find(st.Conditions, conditionResizing) != nil {
		t.Errorf("Resizing kept on a settled job: %+v", st.Conditions)
	}
	last := st.Conditions[len(st.Conditions)-1]
	if last.Type != common.JobRunning {
		t.Errorf("last condition %s, want Running for the State column", last.Type)
	}
}

func TestFixedJobFailedWorkerIsNotReplaced(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 2)
	f.pods[1].Status.Phase = corev1.PodFailed
	f.syncCountsDue(job)
	// The discovery script drops it; no new worker, no replacement mark.
	f.expectKubeWrites(update("configmaps", "pi-config"), update("roles", "pi-launcher"), patchPod("pi-launcher"))
	// Its conditions are the upstream operator's: still Running, and no
	// Resizing that would never settle.
	st := f.writtenStatus()
	if !conditions.Has(st.Conditions, common.JobRunning) || conditions.Find(st.Conditions, conditionResizing) != nil {
		t.Errorf("conditions %+v, want Running and no Resizing", st.Conditions)
	}
}

// TestResizeWithinBatchPeriodWritesNoCondition: the Resizing condition of a
// resize waits with the counts; a resize that settles within
// engine.StatusBatchPeriod never writes it.
func TestResizeWithinBatchPeriodWritesNoCondition(t *testing.T) {
	f := newFixture(t)
	job := elasticJob(f, 2, 1)
	job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas = ptr[int32](3)
	ctx, c := f.readyController(nil)
	requeue, err := c.syncHandler(ctx, jobKey(job))
	if err != nil {
		t.Fatal(err)
	}
	f.expectMPIWrites()
	if requeue != engine.StatusBatchPeriod {
		t.Errorf("requeue after %v, want %v for the Resizing condition", requeue, engine.StatusBatchPeriod)
	}
	// Back to two workers before the period ends: nothing to write.
	job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas = ptr[int32](2)
	f.clock.Step(engine.StatusBatchPeriod / 2)
	if _, err := c.syncHandler(ctx, jobKey(job)); err != nil {
		t.Fatal(err)
	}
	f.expectMPIWrites()
}

// TestElasticJobHeldAtItsBound: a job scaled out again while workers of its
// last scale-in still drain would have more workers than it may have at
// once. The creations beyond the bound wait, the job says so with a Blocked
// condition, and the sync still writes its files and Role.
func TestElasticJobHeldAtItsBound(t *testing.T) {
	f := newFixture(t)
	max := int(kubeflow.MaxWorkers)
	job := elasticJob(f, int32(max), 1)
	job.Spec.ElasticPolicy.MaxReplicas = ptr(kubeflow.MaxWorkers)
	// Two workers drain from a scale-in a moment ago; the job asks for all
	// 5000 again.
	since := testNow.Add(-time.Second).Format(time.RFC3339Nano)
	for _, p := range f.pods[max-2 : max] {
		p.Annotations = map[string]string{elastic.AnnotationDrainingSince: since}
	}
	f.cms[0].Annotations = elastic.State{NextIndex: max}.Annotations()

	if _, err := f.syncPrepared(job, nil); err == nil {
		t.Error("the sync of a job at its bound returned no error, want one that blocks it")
	}
	for _, a := range f.kubeClient.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "pods" {
			t.Fatalf("a worker was created past the bound: %v", a)
		}
	}
	expectConditionTrue(t, f.writtenStatus(), conditionBlocked, reconcile.ReasonAtBound, "2 more are created as draining workers go")
}
