package controller

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow/mpi-operator/pkg/reconcile"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

func strangerPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "stranger-uid"}}
}

// TestForeignServiceBlocks: a Service of the job's name that is not the
// job's, unseen by the cache for want of the label, is never written; the
// job is Blocked with the reason, and no pod is created.
func TestForeignServiceBlocks(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns"}}
	f := newFixture(t).start(storedJob(1), svc)
	if _, err := f.syncErr(); !errors.Is(err, reconcile.ErrResourceExists) {
		t.Fatalf("error %v, want ErrResourceExists", err)
	}
	f.expectWrites(create("services", "job"), create("secrets", "job-ssh"), statusUpdate())
	c := conditions.Find(f.status().Conditions, conditionBlocked)
	if c == nil || c.Reason != "ErrResourceExists" || c.Message != `Service "job" already exists and is not managed by MPIJob job` {
		t.Errorf("Blocked = %+v", c)
	}
	f.expectEvent("Warning ErrResourceExists")
	// Once it is gone, the job goes on and the condition goes.
	must(t, f.kube.CoreV1().Services("ns").Delete(f.ctx, "job", metaDelete))
	f.step()
	f.expectCondition(conditionBlocked, "")
}

// TestForeignPodHoldsFixedWorkerName: a fixed job whose worker name a pod
// of someone else's holds is Blocked, creates the other workers, and gets
// no launcher: mpirun would start ranks on the stranger.
func TestForeignPodHoldsFixedWorkerName(t *testing.T) {
	f := newFixture(t).start(storedJob(2), strangerPod("job-worker-1"))
	if _, err := f.syncErr(); !errors.Is(err, reconcile.ErrResourceExists) {
		t.Fatalf("error %v, want ErrResourceExists", err)
	}
	f.expectWrites(create("services", "job"), create("secrets", "job-ssh"), create("configmaps", "job-config"),
		create("pods", "job-worker-0"), statusUpdate())
	f.expectCondition(conditionBlocked, "True ErrResourceExists")
	if f.launcherJob() != nil {
		t.Error("launcher Job created while a worker name is held")
	}
}

// TestForeignPodSkippedByElasticJob: an elastic job passes over an index
// whose name a stranger holds.
func TestForeignPodSkippedByElasticJob(t *testing.T) {
	f := newFixture(t).start(storedJob(2, withElastic(1, 4)), strangerPod("job-worker-1"))
	f.sync()
	f.expectWrites(create("services", "job"), create("secrets", "job-ssh"), create("configmaps", "job-config"),
		create("pods", "job-worker-0"), create("pods", "job-worker-2"), create("jobs", "job-launcher"), statusUpdate())
}

func TestJobOfWorkerName(t *testing.T) {
	for name, want := range map[string]string{
		"job-worker-0":        "job",
		"my-job-worker-12":    "my-job",
		"a-worker-b-worker-3": "a-worker-b",
		"job-worker-01":       "",
		"job-worker-":         "",
		"-worker-1":           "",
		"job-launcher":        "",
		"job-worker-1-abc":    "",
	} {
		got, ok := jobOfWorkerName(name)
		if ok != (want != "") || got != want {
			t.Errorf("jobOfWorkerName(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}

// TestInvalidSpec: a job that never started fails, naming the field; one
// that started is held: no child is written, and it is Blocked.
func TestInvalidSpec(t *testing.T) {
	noLauncherContainer := func(j *v2beta1.MPIJob) {
		j.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeLauncher].Template.Spec.Containers = nil
	}
	t.Run("never started", func(t *testing.T) {
		f := newFixture(t).start(storedJob(1, noLauncherContainer))
		f.sync()
		f.expectWrites(statusUpdate())
		f.expectCondition(v2beta1.JobFailed, "True InvalidMPIJobSpec")
		want := "Warning InvalidMPIJobSpec MPIJob ns/job is invalid: spec.mpiReplicaSpecs[Launcher].template.spec.containers: Required value: must hold the launcher's container"
		if diff := cmp.Diff([]string{want}, f.events()); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		f.step()
		f.expectWrites()
	})
	t.Run("started", func(t *testing.T) {
		f := newFixture(t).start(storedJob(1))
		runningJob(t, f, "job-worker-0")
		f.updateJob(setWorkers(-1))
		f.refresh()
		var spec *reconcile.SpecError
		if _, err := f.syncErr(); !errors.As(err, &spec) {
			t.Fatalf("error %v, want a SpecError", err)
		}
		f.expectWrites(statusUpdate())
		f.expectCondition(conditionBlocked, "True InvalidMPIJobSpec")
		f.expectCondition(v2beta1.JobFailed, "")
	})
}

// TestStrayWorkerIsAdopted: a worker of the job's whose labels were taken
// away is out of the pod cache: the job's sync gives it back the labels by
// which the job's caches and selectors know it, and, while the cache does
// not show it again, creates no worker in its place.
func TestStrayWorkerIsAdopted(t *testing.T) {
	f := newFixture(t).start(storedJob(2, withElastic(1, 4)))
	runningJob(t, f, "job-worker-0", "job-worker-1")
	stray := f.pod("job-worker-1")
	stray.Labels = map[string]string{"kept": "yes"}
	wantLabels := map[string]string{"kept": "yes", labelOperatorName: operatorName, labelJobName: "job", labelJobRole: roleWorker}
	_, err := f.kube.CoreV1().Pods("ns").Update(f.ctx, stray, metav1.UpdateOptions{})
	must(t, err)
	f.refreshPods()

	f.sync()
	if got := f.pod("job-worker-1").Labels; !maps.Equal(got, wantLabels) {
		t.Errorf("labels of the stray %v, want %v", got, wantLabels)
	}
	if diff := cmp.Diff([]string{"job-worker-0", "job-worker-1"}, slices.DeleteFunc(f.podNames(), func(n string) bool {
		return !strings.Contains(n, "-worker-")
	})); diff != "" {
		t.Errorf("workers (-want +got):\n%s", diff)
	}
}
