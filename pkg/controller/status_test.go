package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/engine"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

var (
	statusTestT1 = metav1.NewTime(time.Date(2026, 5, 6, 7, 0, 0, 0, time.UTC))
	statusTestT2 = metav1.NewTime(time.Date(2026, 5, 6, 7, 5, 0, 0, time.UTC))
)

func statusTestCond(t common.JobConditionType, s corev1.ConditionStatus, reason, msg string, update, transition metav1.Time) common.JobCondition {
	return common.JobCondition{Type: t, Status: s, Reason: reason, Message: msg, LastUpdateTime: update, LastTransitionTime: transition}
}

func TestSetCondition(t *testing.T) {
	T, F := corev1.ConditionTrue, corev1.ConditionFalse
	t1, t2 := statusTestT1, statusTestT2
	created := statusTestCond(common.JobCreated, T, reconcile.ReasonCreated, "created", t1, t1)
	running := statusTestCond(common.JobRunning, T, reconcile.ReasonRunning, "running", t1, t1)
	restarting := statusTestCond(common.JobRestarting, T, reasonRestarting, "restarting", t1, t1)
	runningFalse := statusTestCond(common.JobRunning, F, reconcile.ReasonRunning, "running", t1, t1)
	stoppedRunning := statusTestCond(common.JobRunning, F, reconcile.ReasonRunning, "running", t2, t2)
	newRunning := statusTestCond(common.JobRunning, T, reconcile.ReasonRunning, "running", t2, t2)
	newFailed := statusTestCond(common.JobFailed, T, reconcile.ReasonFailed, "failed", t2, t2)
	newSucceeded := statusTestCond(common.JobSucceeded, T, reconcile.ReasonSucceeded, "done", t2, t2)
	cases := []struct {
		name        string
		before      []common.JobCondition
		condType    common.JobConditionType
		reason, msg string
		wantChanged bool
		want        []common.JobCondition
	}{
		{
			name:     "first condition is True",
			condType: common.JobCreated, reason: reconcile.ReasonCreated, msg: "created",
			wantChanged: true,
			want:        []common.JobCondition{statusTestCond(common.JobCreated, T, reconcile.ReasonCreated, "created", t2, t2)},
		},
		{
			name:     "same type, status and reason is a no-op",
			before:   []common.JobCondition{created},
			condType: common.JobCreated, reason: reconcile.ReasonCreated, msg: "created",
			want: []common.JobCondition{created},
		},
		{
			name:     "another message updates it in place, keeping its transition time",
			before:   []common.JobCondition{running, created},
			condType: common.JobRunning, reason: reconcile.ReasonRunning, msg: "running again",
			wantChanged: true,
			want:        []common.JobCondition{statusTestCond(common.JobRunning, T, reconcile.ReasonRunning, "running again", t2, t1), created},
		},
		{
			// lastTransitionTime is the last time the condition's status
			// changed (Kubernetes API conventions; kubeflow/common keeps it
			// when only the reason changes).
			name:     "another reason keeps the transition time of a condition that stays True",
			before:   []common.JobCondition{statusTestCond(common.JobFailed, T, reconcile.ReasonFailed, "launcher failed", t1, t1)},
			condType: common.JobFailed, reason: reasonDeadlineExceeded, msg: "deadline",
			wantChanged: true,
			want:        []common.JobCondition{statusTestCond(common.JobFailed, T, reasonDeadlineExceeded, "deadline", t2, t1)},
		},
		{
			name:     "Running appended after Created",
			before:   []common.JobCondition{created},
			condType: common.JobRunning, reason: reconcile.ReasonRunning, msg: "running",
			wantChanged: true,
			want:        []common.JobCondition{created, newRunning},
		},
		{
			name:     "Restarting removes Running",
			before:   []common.JobCondition{created, running},
			condType: common.JobRestarting, reason: reasonRestarting, msg: "restarting",
			wantChanged: true,
			want:        []common.JobCondition{created, statusTestCond(common.JobRestarting, T, reasonRestarting, "restarting", t2, t2)},
		},
		{
			name:     "Running removes Restarting",
			before:   []common.JobCondition{created, restarting},
			condType: common.JobRunning, reason: reconcile.ReasonRunning, msg: "running",
			wantChanged: true,
			want:        []common.JobCondition{created, newRunning},
		},
		{
			name:     "Succeeded turns Running False and keeps it",
			before:   []common.JobCondition{created, running},
			condType: common.JobSucceeded, reason: reconcile.ReasonSucceeded, msg: "done",
			wantChanged: true,
			want:        []common.JobCondition{created, stoppedRunning, newSucceeded},
		},
		{
			name:     "Failed turns Running False and keeps it",
			before:   []common.JobCondition{created, running},
			condType: common.JobFailed, reason: reconcile.ReasonFailed, msg: "failed",
			wantChanged: true,
			want:        []common.JobCondition{created, stoppedRunning, newFailed},
		},
		{
			name:     "Failed leaves an already False Running as it was",
			before:   []common.JobCondition{created, runningFalse},
			condType: common.JobFailed, reason: reconcile.ReasonFailed, msg: "failed",
			wantChanged: true,
			want:        []common.JobCondition{created, runningFalse, newFailed},
		},
		{
			name:     "a False condition set again turns True with a new transition time",
			before:   []common.JobCondition{created, runningFalse},
			condType: common.JobRunning, reason: reconcile.ReasonRunning, msg: "running",
			wantChanged: true,
			want:        []common.JobCondition{created, newRunning},
		},
		{
			name:     "Succeeded does not touch Created",
			before:   []common.JobCondition{created},
			condType: common.JobSucceeded, reason: reconcile.ReasonSucceeded, msg: "done",
			wantChanged: true,
			want:        []common.JobCondition{created, newSucceeded},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status := &common.JobStatus{Conditions: append([]common.JobCondition(nil), tc.before...)}
			changed := setCondition(status, tc.condType, tc.reason, tc.msg, t2)
			if changed != tc.wantChanged {
				t.Errorf("setCondition returned %v, want %v", changed, tc.wantChanged)
			}
			if diff := cmp.Diff(tc.want, status.Conditions); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if n := countType(status.Conditions); n > 0 {
				t.Errorf("a condition type is listed %d extra time(s): %+v", n, status.Conditions)
			}
			if conditions.Has(status.Conditions, common.JobRunning) && conditions.Has(status.Conditions, common.JobRestarting) {
				t.Errorf("Running and Restarting are both True: %+v", status.Conditions)
			}
		})
	}
}

// countType returns how many conditions repeat a type listed before them.
func countType(conds []common.JobCondition) int {
	seen := map[common.JobConditionType]bool{}
	dups := 0
	for _, c := range conds {
		if seen[c.Type] {
			dups++
		}
		seen[c.Type] = true
	}
	return dups
}

// TestRestartingNamesLatestLauncher replays what launcherFailed
// (launcher.go) does with the Restarting condition when a launcher fails
// twice without the job reaching Running in between: the condition's message
// is how launcherFailed recognises a failure it has already acted on
// ("(launcher pod uid ...)"), so it must name the latest failed launcher, or
// that failure would be counted again on the next sync.
func TestRestartingNamesLatestLauncher(t *testing.T) {
	status := &common.JobStatus{}
	setCondition(status, common.JobRestarting, reasonRestarting,
		"MPIJob ns/job is restarting its launcher after failure 1 (launcher pod uid uid-a).", statusTestT1)
	setCondition(status, common.JobRestarting, reasonRestarting,
		"MPIJob ns/job is restarting its launcher after failure 2 (launcher pod uid uid-b).", statusTestT2)
	cond := conditions.Find(status.Conditions, common.JobRestarting)
	if cond == nil {
		t.Fatal("no Restarting condition")
	}
	if want := "(launcher pod uid uid-b)"; !strings.Contains(cond.Message, want) {
		t.Errorf("Restarting message %q does not name the second failed launcher %s: launcherFailed will act on that failure again", cond.Message, want)
	}
}

func TestFindHasIsFinished(t *testing.T) {
	T, F := corev1.ConditionTrue, corev1.ConditionFalse
	cases := []struct {
		name                   string
		conds                  []common.JobCondition
		wantRunning, wantFinal bool
	}{
		{name: "none"},
		{name: "running", conds: []common.JobCondition{{Type: common.JobRunning, Status: T}}, wantRunning: true},
		{name: "running False", conds: []common.JobCondition{{Type: common.JobRunning, Status: F}}},
		{name: "succeeded", conds: []common.JobCondition{{Type: common.JobSucceeded, Status: T}}, wantFinal: true},
		{name: "failed", conds: []common.JobCondition{{Type: common.JobFailed, Status: T}}, wantFinal: true},
		{name: "failed False", conds: []common.JobCondition{{Type: common.JobFailed, Status: F}}},
		{name: "failed Unknown", conds: []common.JobCondition{{Type: common.JobFailed, Status: corev1.ConditionUnknown}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &common.JobStatus{Conditions: tc.conds}
			if got := conditions.Has(s.Conditions, common.JobRunning); got != tc.wantRunning {
				t.Errorf("Has(Running) = %v, want %v", got, tc.wantRunning)
			}
			if got := conditions.Finished(s.Conditions); got != tc.wantFinal {
				t.Errorf("Finished = %v, want %v", got, tc.wantFinal)
			}
		})
	}
	s := &common.JobStatus{Conditions: []common.JobCondition{{Type: common.JobCreated, Status: T}}}
	conditions.Find(s.Conditions, common.JobCreated).Reason = "edited"
	if s.Conditions[0].Reason != "edited" {
		t.Error("Find does not return a pointer into the status")
	}
}

func statusTestJob() *kubeflow.MPIJob {
	job := &kubeflow.MPIJob{
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns"},
		Spec: kubeflow.MPIJobSpec{MPIReplicaSpecs: map[common.ReplicaType]*common.ReplicaSpec{
			kubeflow.MPIReplicaTypeLauncher: {},
			kubeflow.MPIReplicaTypeWorker:   {Replicas: ptr[int32](2)},
		}},
	}
	kubeflow.SetDefaults_MPIJob(job)
	return job
}

func statusTestPod(name string, phase corev1.PodPhase, terminating bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Status: corev1.PodStatus{Phase: phase}}
	if terminating {
		p.DeletionTimestamp = &statusTestT1
	}
	return p
}

func TestCountWorkers(t *testing.T) {
	const selector = "group-name=kubeflow.org,mpi-job-name=job,mpi-job-role=worker"
	cases := []struct {
		name string
		pods []*corev1.Pod
		want common.ReplicaStatus
	}{
		{name: "no workers", want: common.ReplicaStatus{Selector: selector}},
		{
			name: "every phase, indices inside and outside 0..replicas-1",
			pods: []*corev1.Pod{
				statusTestPod("job-worker-0", corev1.PodRunning, false),
				statusTestPod("job-worker-1", corev1.PodPending, false),
				statusTestPod("job-worker-5", corev1.PodRunning, false),
				statusTestPod("job-worker-6", corev1.PodRunning, true),
				statusTestPod("job-worker-7", corev1.PodFailed, false),
				statusTestPod("job-worker-8", corev1.PodFailed, true),
				statusTestPod("job-worker-9", corev1.PodSucceeded, false),
				statusTestPod("job-worker-10", corev1.PodUnknown, false),
			},
			want: common.ReplicaStatus{Active: 2, Failed: 2, Succeeded: 1, Selector: selector},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := statusTestJob()
			job.Status.ReplicaStatuses = map[common.ReplicaType]*common.ReplicaStatus{
				kubeflow.MPIReplicaTypeWorker:   {Active: 9, Failed: 9, Succeeded: 9, Selector: "stale"},
				kubeflow.MPIReplicaTypeLauncher: {Active: 1, Failed: 3},
			}
			countWorkers(job, tc.pods)
			want := map[common.ReplicaType]*common.ReplicaStatus{
				kubeflow.MPIReplicaTypeWorker:   &tc.want,
				kubeflow.MPIReplicaTypeLauncher: {Active: 1, Failed: 3},
			}
			if diff := cmp.Diff(want, job.Status.ReplicaStatuses); diff != "" {
				t.Errorf("replica statuses (-want +got):\n%s", diff)
			}
		})
	}
	// A job whose status was never initialised.
	job := statusTestJob()
	countWorkers(job, []*corev1.Pod{statusTestPod("job-worker-0", corev1.PodRunning, false)})
	if diff := cmp.Diff(&common.ReplicaStatus{Active: 1, Selector: selector}, job.Status.ReplicaStatuses[kubeflow.MPIReplicaTypeWorker]); diff != "" {
		t.Errorf("fresh status (-want +got):\n%s", diff)
	}
}

func TestCountLauncher(t *testing.T) {
	cases := []struct {
		name string
		pod  *corev1.Pod
		want common.ReplicaStatus
	}{
		{name: "no launcher", want: common.ReplicaStatus{Failed: 2}},
		{name: "pending", pod: statusTestPod("job-launcher", corev1.PodPending, false), want: common.ReplicaStatus{Failed: 2}},
		{name: "running", pod: statusTestPod("job-launcher", corev1.PodRunning, false), want: common.ReplicaStatus{Active: 1, Failed: 2}},
		{name: "running but terminating", pod: statusTestPod("job-launcher", corev1.PodRunning, true), want: common.ReplicaStatus{Failed: 2}},
		{name: "succeeded", pod: statusTestPod("job-launcher", corev1.PodSucceeded, false), want: common.ReplicaStatus{Succeeded: 1, Failed: 2}},
		{name: "failed: Failed is left to checkLauncherOutcome", pod: statusTestPod("job-launcher", corev1.PodFailed, false), want: common.ReplicaStatus{Failed: 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := statusTestJob()
			job.Status.ReplicaStatuses = map[common.ReplicaType]*common.ReplicaStatus{
				kubeflow.MPIReplicaTypeLauncher: {Active: 1, Succeeded: 1, Failed: 2},
			}
			countLauncher(job, tc.pod)
			if diff := cmp.Diff(&tc.want, job.Status.ReplicaStatuses[kubeflow.MPIReplicaTypeLauncher]); diff != "" {
				t.Errorf("launcher status (-want +got):\n%s", diff)
			}
			if _, ok := job.Status.ReplicaStatuses[kubeflow.MPIReplicaTypeWorker]; ok {
				t.Error("countLauncher added a Worker status")
			}
		})
	}
}

func TestInitStatus(t *testing.T) {
	var empty common.JobStatus
	initStatus(&empty)
	want := common.JobStatus{Conditions: []common.JobCondition{}, ReplicaStatuses: map[common.ReplicaType]*common.ReplicaStatus{}}
	if diff := cmp.Diff(want, empty); diff != "" {
		t.Errorf("initStatus on empty (-want +got):\n%s", diff)
	}
	if empty.Conditions == nil || empty.ReplicaStatuses == nil {
		t.Error("initStatus left nil fields")
	}
	full := common.JobStatus{
		Conditions:      []common.JobCondition{{Type: common.JobCreated, Status: corev1.ConditionTrue}},
		ReplicaStatuses: map[common.ReplicaType]*common.ReplicaStatus{kubeflow.MPIReplicaTypeWorker: {Active: 2}},
		StartTime:       &statusTestT1,
	}
	before := *full.DeepCopy()
	initStatus(&full)
	if diff := cmp.Diff(before, full); diff != "" {
		t.Errorf("initStatus changed a filled status (-want +got):\n%s", diff)
	}
}

func TestReplicaStatus(t *testing.T) {
	var s common.JobStatus
	rs := replicaStatus(&s, kubeflow.MPIReplicaTypeWorker)
	rs.Active = 3
	if got := s.ReplicaStatuses[kubeflow.MPIReplicaTypeWorker]; got == nil || got.Active != 3 {
		t.Errorf("replicaStatus did not return the stored status: %+v", s.ReplicaStatuses)
	}
	if again := replicaStatus(&s, kubeflow.MPIReplicaTypeWorker); again != rs {
		t.Error("replicaStatus returned a new status for an existing type")
	}
}

// TestCountChangesWait: a change of the replica counts alone waits
// engine.StatusBatchPeriod, so that the workers of a resize are counted in one
// write; a change of a condition is written at once.
func TestCountChangesWait(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 2)
	f.pods[1].Status.Phase = corev1.PodPending
	f.setFiles(job, elastic.Hosts{Desired: []string{"pi-worker-0", "pi-worker-1"}, Running: []string{"pi-worker-0"}}, elastic.State{})
	ctx, c := f.readyController(nil)
	requeue, err := c.syncHandler(ctx, jobKey(job))
	if err != nil {
		t.Fatal(err)
	}
	f.expectMPIWrites()
	if requeue != engine.StatusBatchPeriod {
		t.Errorf("requeue after %v, want %v", requeue, engine.StatusBatchPeriod)
	}
	f.clock.Step(engine.StatusBatchPeriod / 2)
	if requeue, _ = c.syncHandler(ctx, jobKey(job)); requeue != engine.StatusBatchPeriod/2 {
		t.Errorf("second sync: requeue after %v, want %v", requeue, engine.StatusBatchPeriod/2)
	}
	f.expectMPIWrites()
	f.clock.Step(engine.StatusBatchPeriod / 2)
	if _, err := c.syncHandler(ctx, jobKey(job)); err != nil {
		t.Fatal(err)
	}
	if got := f.writtenStatus().ReplicaStatuses[kubeflow.MPIReplicaTypeWorker].Active; got != 1 {
		t.Errorf("active workers written %d, want 1", got)
	}
}

// TestConditionChangeWritesCountsAtOnce: counts that change with a condition
// are written in the same sync.
func TestConditionChangeWritesCountsAtOnce(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 2)
	f.pods[1].Status.Phase = corev1.PodSucceeded
	f.pods[2].Status.Phase = corev1.PodSucceeded
	f.sync(job)
	st := f.writtenStatus()
	if !conditions.Has(st.Conditions, common.JobSucceeded) || st.ReplicaStatuses[kubeflow.MPIReplicaTypeWorker].Succeeded != 1 {
		t.Errorf("status %+v, want Succeeded with 1 succeeded worker", st)
	}
}
