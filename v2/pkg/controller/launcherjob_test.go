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
// Ready, and not before; an elastic job's, once minReplicas workers are.
func TestWaitForWorkersReady(t *testing.T) {
	cases := []struct {
		name string
		job  *v2beta1.MPIJob
		// first turns Ready, which is not enough; then second does.
		first, second string
	}{
		{"fixed", storedJob(2, waitForWorkers), "job-worker-0", "job-worker-1"},
		{"elastic", storedJob(3, waitForWorkers, withElastic(2, 4)), "job-worker-0", "job-worker-2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t).start(tc.job)
			f.sync()
			f.refresh()
			f.setPhase(corev1.PodRunning, tc.first)
			f.step()
			if f.launcherJob() != nil {
				t.Fatalf("launcher Job created with only %s Ready", tc.first)
			}
			f.refresh()
			f.setPhase(corev1.PodRunning, tc.second)
			f.step()
			f.expectWrites(create("jobs", "job-launcher"), statusUpdate())
		})
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
	expectRunning := func(when string) {
		t.Helper()
		if got := conditions.Find(f.status().Conditions, v2beta1.JobRunning); got == nil || *got != running {
			t.Errorf("Running = %+v %s, want %+v", got, when, running)
		}
	}
	must(t, f.kube.CoreV1().Pods("ns").Delete(f.ctx, "job-launcher-abcde", metaDelete))
	f.setLauncherStatus(batchv1.JobStatus{Failed: 1})
	f.step()
	expectRunning("while the launcher retries")
	f.expectCondition(v2beta1.JobRestarting, "")
	f.expectNoEvents()
	if got := f.status().ReplicaStatuses[v2beta1.MPIReplicaTypeLauncher].Failed; got != 1 {
		t.Errorf("launcher failed = %d", got)
	}
	f.refresh()
	f.runLauncherPod()
	f.step()
	expectRunning("once the launcher runs again")
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
