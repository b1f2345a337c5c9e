package controller

import (
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"

	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

func suspend(on bool) func(*v2beta1.MPIJob) {
	return func(j *v2beta1.MPIJob) { j.Spec.RunPolicy.Suspend = ptr(on) }
}

// TestSuspendRunningJob: the launcher Job is suspended first, then the
// script is emptied before the workers go, the PodGroup deleted, and the
// conditions say so.
func TestSuspendRunningJob(t *testing.T) {
	f := newFixture(t)
	f.cfg.GangSchedulerName = "volcano"
	f.start(storedJob(2))
	runningJob(t, f, "job-worker-0", "job-worker-1")
	if _, ok := f.groups.volcano["job"]; !ok {
		t.Fatal("no PodGroup while running")
	}
	f.updateJob(suspend(true))
	f.step()
	f.expectWrites(
		update("jobs", "job-launcher"),
		update("configmaps", "job-config"),
		del("pods", "job-worker-0"), del("pods", "job-worker-1"),
		statusUpdate(),
	)
	f.expectGroupWrites(del("podgroups", "job"))
	f.expectListed()
	if lj := f.launcherJob(); lj.Spec.Suspend == nil || !*lj.Spec.Suspend {
		t.Error("launcher Job not suspended")
	}
	f.expectCondition(v2beta1.JobSuspended, "True MPIJobSuspended")
	f.expectCondition(v2beta1.JobRunning, "False MPIJobSuspended")
	if st := f.status(); st.StartTime != nil {
		t.Errorf("startTime %v while suspended", st.StartTime)
	}
	// The cache does not show the deletions yet: no pod write is repeated,
	// and the job is looked at again should their events be lost. (The
	// launcher Job's update is sent again from the stale copy; the API
	// server refuses it as a conflict.)
	f.kube.ClearActions()
	f.mpi.ClearActions()
	f.groups.writes = nil
	if d := f.sync(); d <= 0 {
		t.Errorf("requeue = %v, want the wait for the cache", d)
	}
	f.expectWrites(update("jobs", "job-launcher"))
	f.step()
	f.expectWrites(statusUpdate()) // the workers are gone
	f.step()
	f.expectWrites()
}

// TestSuspendKeepsWorkersUntilTheLauncherIsSuspended: while the launcher
// Job's suspension fails, its workers stay, listed: mpirun may still be
// using them.
func TestSuspendKeepsWorkersUntilTheLauncherIsSuspended(t *testing.T) {
	f := newFixture(t).start(storedJob(2))
	runningJob(t, f, "job-worker-0", "job-worker-1")
	f.updateJob(suspend(true))
	f.refresh()
	f.kube.PrependReactor("update", "jobs", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("try later")
	})
	if _, err := f.syncErr(); err == nil {
		t.Fatal("sync succeeded while the launcher Job could not be suspended")
	}
	f.expectWrites(update("jobs", "job-launcher"), statusUpdate())
	f.expectPods("job-launcher-abcde", "job-worker-0", "job-worker-1")
	f.expectListed("job-worker-0", "job-worker-1")
}

// TestCreatedSuspended: a job created suspended gets no pods and no
// launcher Job, as Kueue expects.
func TestCreatedSuspended(t *testing.T) {
	f := newFixture(t).start(storedJob(2, suspend(true)))
	f.sync()
	f.expectWrites(statusUpdate())
	f.expectPods()
	if f.launcherJob() != nil {
		t.Error("launcher Job created")
	}
	st := f.status()
	var got []string
	for _, c := range st.Conditions {
		got = append(got, string(c.Type)+" "+string(c.Status)+" "+c.Reason)
	}
	// Suspended last: kubectl's State column shows the last condition.
	want := []string{"Created True MPIJobCreated", "Running False MPIJobSuspended", "Suspended True MPIJobSuspended"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	if st.StartTime != nil {
		t.Error("startTime set")
	}
	f.step()
	f.expectWrites()
}

// TestResume: the launcher Job's pod template takes the scheduling
// directives Kueue wrote into the job while it was suspended, in the
// request that unsuspends it; the workers come back; the job starts anew.
func TestResume(t *testing.T) {
	f := newFixture(t).start(storedJob(2))
	runningJob(t, f, "job-worker-0", "job-worker-1")
	f.updateJob(suspend(true))
	f.step()
	f.refresh()
	f.clock.Step(3600e9)
	f.updateJob(func(j *v2beta1.MPIJob) {
		j.Spec.RunPolicy.Suspend = ptr(false)
		tmpl := &j.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeLauncher].Template
		tmpl.Spec.NodeSelector = map[string]string{"cloud.example/flavor": "a100"}
		tmpl.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
		tmpl.Labels["kueue.x-k8s.io/podset"] = "launcher"
	})
	f.events()
	f.step()
	// The files list the same workers, none of them running.
	f.expectWrites(
		create("pods", "job-worker-0"), create("pods", "job-worker-1"),
		update("jobs", "job-launcher"),
		statusUpdate(),
	)
	lj := f.launcherJob()
	if lj.Spec.Suspend == nil || *lj.Spec.Suspend {
		t.Error("launcher Job still suspended")
	}
	tmpl := lj.Spec.Template
	if tmpl.Spec.NodeSelector["cloud.example/flavor"] != "a100" || len(tmpl.Spec.Tolerations) != 1 || tmpl.Labels["kueue.x-k8s.io/podset"] != "launcher" {
		t.Errorf("launcher template not in line: %+v %+v", tmpl.Spec.NodeSelector, tmpl.Labels)
	}
	f.expectCondition(v2beta1.JobSuspended, "False MPIJobResumed")
	if st := f.status(); st.StartTime == nil || !st.StartTime.Equal(&metav1.Time{Time: f.clock.Now()}) {
		t.Errorf("startTime %v, want now", st.StartTime)
	}
	f.expectEvent("Normal MPIJobResumed")
}

// TestResumeAfterTheLauncherRan: a launcher Job that ran before its
// suspension has a start time, which the API server requires gone before
// its template's scheduling directives may change: the controller clears
// it, then moves the template and unsuspends in one update. A launcher
// resumed where it ran keeps its start time: only the suspension changes.
func TestResumeAfterTheLauncherRan(t *testing.T) {
	cases := []struct {
		name   string
		flavor string // of the node the launcher moves to; "" for none
	}{{"elsewhere", "b"}, {"in place", ""}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t).start(storedJob(2))
			runningJob(t, f, "job-worker-0", "job-worker-1")
			f.updateJob(suspend(true))
			f.step()
			f.setLauncherStatus(batchv1.JobStatus{StartTime: &metav1.Time{Time: f.clock.Now()}})
			f.refresh()
			f.updateJob(func(j *v2beta1.MPIJob) {
				j.Spec.RunPolicy.Suspend = ptr(false)
				if tc.flavor != "" {
					tmpl := &j.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeLauncher].Template
					tmpl.Spec.NodeSelector = map[string]string{"cloud.example/flavor": tc.flavor}
				}
			})
			f.step()
			want := []action{create("pods", "job-worker-0"), create("pods", "job-worker-1")}
			if tc.flavor != "" {
				want = append(want, action{Verb: "update", Resource: "jobs", Sub: "status", Name: "job-launcher"})
			}
			f.expectWrites(append(want, update("jobs", "job-launcher"), statusUpdate())...)
			lj := f.launcherJob()
			if (lj.Status.StartTime == nil) != (tc.flavor != "") || lj.Spec.Suspend == nil || *lj.Spec.Suspend ||
				lj.Spec.Template.Spec.NodeSelector["cloud.example/flavor"] != tc.flavor {
				t.Errorf("launcher Job: startTime %v, suspend %v, nodeSelector %v",
					lj.Status.StartTime, lj.Spec.Suspend, lj.Spec.Template.Spec.NodeSelector)
			}
		})
	}
}

// TestResumeKeepsTheJobControllersLabels: the labels that the API server
// gave the launcher Job's template, which its selector matches, stay.
func TestResumeKeepsTheJobControllersLabels(t *testing.T) {
	lj := &batchv1.Job{}
	lj.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": "u"}}
	lj.Spec.Template.Labels = map[string]string{
		"batch.kubernetes.io/controller-uid": "u", "batch.kubernetes.io/job-name": "job-launcher",
		"controller-uid": "u", "job-name": "job-launcher", "stale": "x",
	}
	keys := slices.Sorted(maps.Keys(withJobControllerLabels(map[string]string{"app": "a"}, lj)))
	want := []string{"app", "batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-name", "controller-uid", "job-name"}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
}

// TestManagedElsewhere: a job that MultiKueue manages is left alone.
func TestManagedElsewhere(t *testing.T) {
	f := newFixture(t).start(storedJob(2, func(j *v2beta1.MPIJob) {
		j.Spec.RunPolicy.ManagedBy = ptr(v2beta1.MultiKueueController)
	}))
	f.sync()
	f.expectWrites()
	f.expectNoEvents()
}

// TestResumeElasticTakesNewIndices: an elastic job's workers come back
// under indices it has never used, as Horovod may have blacklisted the old
// names.
func TestResumeElasticTakesNewIndices(t *testing.T) {
	f := newFixture(t).start(storedJob(2, withElastic(1, 4)))
	runningJob(t, f, "job-worker-0", "job-worker-1")
	f.updateJob(suspend(true))
	f.step()
	f.step()
	f.updateJob(suspend(false))
	f.step()
	f.expectPods("job-launcher-abcde", "job-worker-2", "job-worker-3")
}

// upstreamConditions are conditions as the upstream operator words them,
// "<type> <status> <reason> <message>" each, all set at testNow.
func upstreamConditions(conds ...[4]string) []v2beta1.JobCondition {
	at := metav1.NewTime(testNow)
	out := make([]v2beta1.JobCondition, 0, len(conds))
	for _, c := range conds {
		out = append(out, v2beta1.JobCondition{Type: v2beta1.JobConditionType(c[0]), Status: corev1.ConditionStatus(c[1]),
			Reason: c[2], Message: c[3], LastUpdateTime: at, LastTransitionTime: at})
	}
	return out
}

// TestUpstreamSuspensionTakenOver: a job that the upstream operator
// suspended, or resumed, keeps the conditions it wrote once this operator
// takes it over, and no event announces the suspension or the resume
// again. (The status gains the replica selectors, which upstream's lacks.)
func TestUpstreamSuspensionTakenOver(t *testing.T) {
	t.Run("suspended", func(t *testing.T) {
		job := storedJob(2, suspend(true))
		job.Status.Conditions = upstreamConditions(
			[4]string{"Created", "True", "MPIJobCreated", "MPIJob ns/job is created."},
			[4]string{"Suspended", "True", "MPIJobSuspended", "MPIJob suspended"},
			[4]string{"Running", "False", "MPIJobSuspended", "MPIJob ns/job is suspended."},
		)
		f := newFixture(t).start(job)
		f.sync()
		if diff := cmp.Diff(job.Status.Conditions, f.status().Conditions); diff != "" {
			t.Errorf("conditions (-upstream's +after the sync):\n%s", diff)
		}
		f.expectNoEvents()
		f.step()
		f.expectWrites()

		// Resumed here, it says so in upstream's words too.
		f.updateJob(suspend(false))
		f.step()
		if c := conditions.Find(f.status().Conditions, v2beta1.JobSuspended); c == nil ||
			c.Status != corev1.ConditionFalse || c.Reason != reasonResumed || c.Message != "MPIJob resumed" {
			t.Errorf("Suspended after the resume: %+v", c)
		}
	})
	t.Run("resumed", func(t *testing.T) {
		f := newFixture(t).start(storedJob(2))
		runningJob(t, f, "job-worker-0", "job-worker-1")
		j, err := f.mpi.KubeflowV2beta1().MPIJobs("ns").Get(f.ctx, "job", metav1.GetOptions{})
		must(t, err)
		j.Status.Conditions = upstreamConditions(
			[4]string{"Created", "True", "MPIJobCreated", "MPIJob ns/job is created."},
			[4]string{"Suspended", "False", "MPIJobResumed", "MPIJob resumed"},
			[4]string{"Running", "True", "MPIJobRunning", "MPIJob ns/job is running."},
		)
		_, err = f.mpi.KubeflowV2beta1().MPIJobs("ns").UpdateStatus(f.ctx, j, metav1.UpdateOptions{})
		must(t, err)
		f.step()
		f.expectWrites()
		f.expectNoEvents()
	})
}
