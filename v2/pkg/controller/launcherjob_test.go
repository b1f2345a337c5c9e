package controller

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

func waitForWorkers(j *v2beta1.MPIJob) {
	j.Spec.LauncherCreationPolicy = v2beta1.LauncherCreationPolicyWaitForWorkersReady
}

// TestWaitForWorkersReady: the launcher Job comes once every worker is
// Ready, and not before.
func TestWaitForWorkersReady(t *testing.T) {
	f := newFixture(t).start(storedJob(2, waitForWorkers))
	f.sync()
	f.refresh()
	f.setPhase(corev1.PodRunning, "job-worker-0")
	f.step()
	if f.launcherJob() != nil {
		t.Fatal("launcher Job created with one of two workers Ready")
	}
	f.refresh()
	f.setPhase(corev1.PodRunning, "job-worker-1")
	f.step()
	f.expectWrites(create("jobs", "job-launcher"), statusUpdate())
}

// TestWaitForWorkersReadyElastic: an elastic job's launcher waits for
// minReplicas Ready workers.
func TestWaitForWorkersReadyElastic(t *testing.T) {
	f := newFixture(t).start(storedJob(3, waitForWorkers, withElastic(2, 4)))
	f.sync()
	f.refresh()
	f.setPhase(corev1.PodRunning, "job-worker-0")
	f.step()
	if f.launcherJob() != nil {
		t.Fatal("launcher Job created with one Ready worker, minReplicas 2")
	}
	f.refresh()
	f.setPhase(corev1.PodRunning, "job-worker-2")
	f.step()
	if f.launcherJob() == nil {
		t.Fatal("no launcher Job with minReplicas Ready workers")
	}
}

// TestLauncherRetryKeepsRunning: while the launcher Job replaces a failed
// pod, the job stays Running, as with the upstream operator (Kueue reads
// PodsReady from it): no Restarting condition and no event; the failure
// shows in the launcher's replica status.
func TestLauncherRetryKeepsRunning(t *testing.T) {
	f := newFixture(t).start(storedJob(1))
	runningJob(t, f, "job-worker-0")
	running := *conditions.Find(f.status().Conditions, v2beta1.JobRunning)
	must(t, f.kube.CoreV1().Pods("ns").Delete(f.ctx, "job-launcher-abcde", metaDelete))
	f.setLauncherStatus(batchv1.JobStatus{Failed: 1})
	f.step()
	st := f.status()
	if got := conditions.Find(st.Conditions, v2beta1.JobRunning); got == nil || *got != running {
		t.Errorf("Running = %+v while the launcher retries, want %+v", got, running)
	}
	if got := f.condition(v2beta1.JobRestarting); got != "" {
		t.Errorf("Restarting = %q", got)
	}
	if events := f.events(); len(events) != 0 {
		t.Errorf("events %q", events)
	}
	if got := st.ReplicaStatuses[v2beta1.MPIReplicaTypeLauncher].Failed; got != 1 {
		t.Errorf("launcher failed = %d", got)
	}
	f.refresh()
	f.runLauncherPod()
	f.step()
	st = f.status()
	if got := conditions.Find(st.Conditions, v2beta1.JobRunning); got == nil || *got != running {
		t.Errorf("Running = %+v once the launcher runs again, want %+v", got, running)
	}
}

// TestLauncherRefreshedAfterScriptChange: the running launcher pod is
// annotated with the hash of each new discover_hosts.sh.
func TestLauncherRefreshedAfterScriptChange(t *testing.T) {
	f := newFixture(t).start(storedJob(2, withElastic(1, 3)))
	runningJob(t, f, "job-worker-0", "job-worker-1")
	if got, want := f.pod("job-launcher-abcde").Annotations[elastic.AnnotationHostsHash], elastic.HostsHash(script("job-worker-0", "job-worker-1")); got != want {
		t.Errorf("hosts hash %q, want %q", got, want)
	}
	f.cfg.RefreshLauncher = false
	f.c.cfg.RefreshLauncher = false
	f.updateJob(setWorkers(1))
	f.step()
	f.expectWrites(update("configmaps", "job-config"), patchPod("job-worker-1"), statusUpdate())
}
