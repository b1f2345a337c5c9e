package controller

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

func TestNewJobGetsItsChildrenAndStatus(t *testing.T) {
	f := newFixture(t).start(storedJob(2))
	if d := f.sync(); d != 0 {
		t.Errorf("requeue = %v, want none", d)
	}
	f.expectWrites(
		create("services", "job"), create("secrets", "job-ssh"),
		create("configmaps", "job-config"),
		create("pods", "job-worker-0"), create("pods", "job-worker-1"),
		create("jobs", "job-launcher"),
		statusUpdate(),
	)
	job := newTestJob(2)
	if lj := f.launcherJob(); !cmp.Equal(lj.Spec, newLauncherJob(job, gangScheduler{}).Spec) {
		t.Errorf("launcher Job spec (-want +got):\n%s", cmp.Diff(newLauncherJob(job, gangScheduler{}).Spec, lj.Spec))
	}
	if diff := cmp.Diff(newWorker(job, 1, gangScheduler{}, ""), f.pod("job-worker-1"), asServed); diff != "" {
		t.Errorf("worker (-want +got):\n%s", diff)
	}
	hostfile, discover := f.files()
	if want := "job-worker-0.job.ns.svc slots=1\njob-worker-1.job.ns.svc slots=1\n"; hostfile != want || discover != script() {
		t.Errorf("files: hostfile %q, discover_hosts.sh %q", hostfile, discover)
	}
	now := metav1.NewTime(testNow)
	replicaStatus := func(role string) *v2beta1.ReplicaStatus {
		return &v2beta1.ReplicaStatus{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{labelOperatorName: "mpi-operator", labelJobName: "job", labelJobRole: role}},
			Selector:      "training.kubeflow.org/job-name=job,training.kubeflow.org/job-role=" + role + ",training.kubeflow.org/operator-name=mpi-operator",
		}
	}
	want := v2beta1.JobStatus{
		Conditions: []v2beta1.JobCondition{{
			Type: v2beta1.JobCreated, Status: corev1.ConditionTrue, Reason: "MPIJobCreated",
			Message: "MPIJob ns/job is created.", LastUpdateTime: now, LastTransitionTime: now,
		}},
		ReplicaStatuses: map[v2beta1.MPIReplicaType]*v2beta1.ReplicaStatus{
			v2beta1.MPIReplicaTypeLauncher: replicaStatus("launcher"),
			v2beta1.MPIReplicaTypeWorker:   replicaStatus("worker"),
		},
		StartTime:         &now,
		LastReconcileTime: &now,
	}
	if diff := cmp.Diff(want, f.status()); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	wantEvents := []string{
		"Normal WorkersScalingUp Scaling up to 2 worker(s): creating job-worker-0, job-worker-1",
		"Normal MPIJobCreated MPIJob ns/job is created.",
	}
	if diff := cmp.Diff(wantEvents, f.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// runningJob brings the test job to where it runs: its workers and its
// launcher pod run, and the workers' names resolve.
func runningJob(t *testing.T, f *fixture, workers ...string) {
	t.Helper()
	f.sync()
	f.refresh()
	f.setPhase(corev1.PodRunning, workers...)
	f.publish("job", workers...)
	f.runLauncherPod()
	f.step()
	f.step()
	f.refresh()
	f.events()
}

// TestSecondSyncWritesNothing: a sync on a cache that shows the last
// sync's writes writes nothing, at each stage of a job's start.
func TestSecondSyncWritesNothing(t *testing.T) {
	f := newFixture(t).start(storedJob(2))
	f.sync()
	f.step()
	f.expectWrites()

	f.setPhase(corev1.PodRunning, "job-worker-0", "job-worker-1")
	f.publish("job", "job-worker-0", "job-worker-1")
	f.runLauncherPod()
	f.step() // lists the workers, refreshes the launcher, Running
	f.step()
	f.expectWrites()
	f.expectCondition(v2beta1.JobRunning, "True MPIJobRunning")
	f.expectListed("job-worker-0", "job-worker-1")
}

// TestServiceOfWorkersOnlyIsUpdated: the Service of a running job that
// selects its workers only, as this operator's did before, is updated in
// place to select the launcher too, keeping its identity; the launcher's
// endpoint then in its EndpointSlice puts no launcher in discover_hosts.sh.
func TestServiceOfWorkersOnlyIsUpdated(t *testing.T) {
	old := &corev1.Service{
		ObjectMeta: testChildMeta("job"),
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector: map[string]string{
				labelOperatorName: operatorName, labelJobName: "job", labelJobRole: roleWorker,
			},
			PublishNotReadyAddresses: true,
		},
	}
	old.UID = "service-uid"
	f := newFixture(t).start(storedJob(2), old)
	f.sync()
	var serviceWrites []action
	for _, w := range f.writes() {
		if w.Resource == "services" {
			serviceWrites = append(serviceWrites, w)
		}
	}
	if diff := cmp.Diff([]action{update("services", "job")}, serviceWrites); diff != "" {
		t.Errorf("Service writes (-want +got):\n%s", diff)
	}
	svc, err := f.kube.CoreV1().Services("ns").Get(f.ctx, "job", metaGet)
	must(t, err)
	want := newService(newTestJob(2))
	want.UID = "service-uid"
	if diff := cmp.Diff(want, svc, asServed); diff != "" {
		t.Errorf("Service (-want +got):\n%s", diff)
	}

	f.refresh()
	f.setPhase(corev1.PodRunning, "job-worker-0", "job-worker-1")
	f.runLauncherPod()
	f.publish("job", "job-worker-0", "job-worker-1", "job-launcher-abcde")
	f.step()
	f.step()
	f.expectListed("job-worker-0", "job-worker-1")
	f.expectCondition(v2beta1.JobRunning, "True MPIJobRunning")
}

func TestLauncherJobOutcome(t *testing.T) {
	cases := map[string]struct {
		cond       batchv1.JobCondition
		wantType   v2beta1.JobConditionType
		wantReason string
		wantEvent  string
	}{
		"Complete": {
			cond:     batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue},
			wantType: v2beta1.JobSucceeded, wantReason: "MPIJobSucceeded",
			wantEvent: "Normal MPIJobSucceeded MPIJob ns/job successfully completed.",
		},
		"Failed: backoff limit": {
			cond: batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
				Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"},
			wantType: v2beta1.JobFailed, wantReason: "BackoffLimitExceeded",
			wantEvent: "Warning BackoffLimitExceeded MPIJob ns/job has failed: its launcher Job job-launcher failed (BackoffLimitExceeded): Job has reached the specified backoff limit",
		},
		"Failed: deadline": {
			cond:     batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "DeadlineExceeded"},
			wantType: v2beta1.JobFailed, wantReason: "DeadlineExceeded",
			wantEvent: "Warning DeadlineExceeded MPIJob ns/job has failed: its launcher Job job-launcher failed (DeadlineExceeded)",
		},
		"FailureTarget: deadline, the launcher pod stopping": {
			cond:     batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "DeadlineExceeded"},
			wantType: v2beta1.JobFailed, wantReason: "DeadlineExceeded",
			wantEvent: "Warning DeadlineExceeded MPIJob ns/job has failed: its launcher Job job-launcher failed (DeadlineExceeded)",
		},
		"SuccessCriteriaMet, the launcher pod stopping": {
			cond:     batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue},
			wantType: v2beta1.JobSucceeded, wantReason: "MPIJobSucceeded",
			wantEvent: "Normal MPIJobSucceeded MPIJob ns/job successfully completed.",
		},
		"Failed without a reason": {
			cond:     batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue},
			wantType: v2beta1.JobFailed, wantReason: "MPIJobFailed",
			wantEvent: "Warning MPIJobFailed MPIJob ns/job has failed: its launcher Job job-launcher failed (MPIJobFailed)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t).start(storedJob(1))
			runningJob(t, f, "job-worker-0")
			f.setLauncherStatus(batchv1.JobStatus{Conditions: []batchv1.JobCondition{tc.cond}, Succeeded: 1})
			f.step()
			// The end is recorded first; nothing is deleted yet.
			f.expectWrites(statusUpdate())
			f.expectCondition(tc.wantType, "True "+tc.wantReason)
			f.expectCondition(v2beta1.JobRunning, "False MPIJobRunning")
			st := f.status()
			if st.CompletionTime == nil {
				t.Error("no completionTime")
			}
			if st.ReplicaStatuses[v2beta1.MPIReplicaTypeLauncher].Succeeded != 1 {
				t.Errorf("launcher status %+v", st.ReplicaStatuses[v2beta1.MPIReplicaTypeLauncher])
			}
			f.expectEvent(tc.wantEvent)
			// cleanPodPolicy None: the finished job keeps its workers.
			f.step()
			f.expectWrites()
		})
	}
}

// TestUnsetWorkerReplicasMeanOne pins what a Worker spec without replicas
// means here: one worker, in the pods, the files and the elastic bounds.
// Upstream's operator defaults it to 0 and then refuses the job (v2/README.md
// lists the difference).
func TestUnsetWorkerReplicasMeanOne(t *testing.T) {
	for _, elastic := range []bool{false, true} {
		t.Run(fmt.Sprintf("elastic=%t", elastic), func(t *testing.T) {
			job := storedJob(2, func(j *v2beta1.MPIJob) {
				j.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeWorker].Replicas = nil
				if elastic {
					withElastic(1, 3)(j)
				}
			})
			f := newFixture(t).start(job)
			f.sync()
			f.expectPods("job-worker-0")
			if hostfile, _ := f.files(); hostfile != "job-worker-0.job.ns.svc slots=1\n" {
				t.Errorf("hostfile %q, want job-worker-0 alone", hostfile)
			}
			if f.condition(v2beta1.JobFailed) != "" || f.launcherJob() == nil {
				t.Errorf("the job failed (%q) or has no launcher Job", f.condition(v2beta1.JobFailed))
			}
		})
	}
}
