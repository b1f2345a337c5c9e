package controller

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	common "github.com/kubeflow/common/pkg/apis/common/v1"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/engine"
	"github.com/kubeflow/mpi-operator/pkg/metrics"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

func TestFirstSyncCreatesChildrenInOrder(t *testing.T) {
	f := newFixture(t)
	job := newTestJob("pi", 2)
	f.jobs = append(f.jobs, job)

	if d := f.sync(job); d != 0 {
		t.Errorf("requeue = %v, want none", d)
	}
	f.expectKubeWrites(
		create("configmaps", "pi-config"),
		create("serviceaccounts", "pi-launcher"),
		create("roles", "pi-launcher"),
		create("rolebindings", "pi-launcher"),
		create("pods", "pi-worker-0"),
		create("pods", "pi-worker-1"),
		create("pods", "pi-launcher"),
	)
	f.expectMPIWrites(statusUpdate())
	// The API server lets the operator bind only a Role that exists.
	sent := writes(f.kubeClient.Actions())
	if role, binding := slices.Index(sent, create("roles", "pi-launcher")), slices.Index(sent, create("rolebindings", "pi-launcher")); binding < role {
		t.Errorf("RoleBinding created before its Role: %v", sent)
	}

	d := defaulted(job)
	hosts := elastic.Hosts{Desired: []string{"pi-worker-0", "pi-worker-1"}}
	if diff := cmp.Diff(newConfigMap(d, hosts, elastic.State{}), createdObject[*corev1.ConfigMap](f, "configmaps", "pi-config")); diff != "" {
		t.Errorf("ConfigMap (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(newLauncherRole(d, hosts.Desired), createdObject[*rbacv1.Role](f, "roles", "pi-launcher")); diff != "" {
		t.Errorf("Role (-want +got):\n%s", diff)
	}
	wantLauncher := newLauncher(d, launcherOptions{
		deliveryImage: testDeliveryImage, minReadyWorkers: 2, hostsHash: elastic.HostsHash("#!/bin/sh\n"),
	})
	if diff := cmp.Diff(wantLauncher, createdObject[*corev1.Pod](f, "pods", "pi-launcher")); diff != "" {
		t.Errorf("launcher (-want +got):\n%s", diff)
	}

	now := metav1.NewTime(testNow)
	want := common.JobStatus{
		Conditions: []common.JobCondition{{
			Type: common.JobCreated, Status: corev1.ConditionTrue, Reason: reconcile.ReasonCreated,
			Message: "MPIJob ns/pi is created.", LastUpdateTime: now, LastTransitionTime: now,
		}},
		ReplicaStatuses: map[common.ReplicaType]*common.ReplicaStatus{
			kubeflow.MPIReplicaTypeLauncher: {},
			kubeflow.MPIReplicaTypeWorker:   {Selector: "group-name=kubeflow.org,mpi-job-name=pi,mpi-job-role=worker"},
		},
		StartTime:         &now,
		LastReconcileTime: &now,
	}
	if diff := cmp.Diff(want, f.writtenStatus()); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	// Actions are reported as they happen; transitions once the status
	// that holds them is written.
	wantEvents := []string{
		"Normal WorkersScalingUp Scaling up to 2 worker(s): creating pi-worker-0, pi-worker-1",
		"Normal MPIJobCreated MPIJob ns/pi is created.",
	}
	if diff := cmp.Diff(wantEvents, f.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestFirstSyncWithGangScheduling(t *testing.T) {
	f := newFixture(t)
	f.cfg.GangSchedulerName = "volcano"
	job := newTestJob("pi", 3)
	job.Spec.RunPolicy = &common.RunPolicy{SchedulingPolicy: &common.SchedulingPolicy{Queue: "research"}}
	f.jobs = append(f.jobs, job)

	f.sync(job)
	if len(f.podGroups.created) != 1 {
		t.Fatalf("PodGroups created: %d, want 1", len(f.podGroups.created))
	}
	if diff := cmp.Diff(newPodGroup(defaulted(job), 4), f.podGroups.created[0]); diff != "" {
		t.Errorf("PodGroup (-want +got):\n%s", diff)
	}
	if got := f.podGroups.created[0].Spec.Queue; got != "research" {
		t.Errorf("queue = %q", got)
	}
	w := createdObject[*corev1.Pod](f, "pods", "pi-worker-0")
	if w.Spec.SchedulerName != "volcano" || w.Annotations[annotationVolcanoGroup] != "pi" {
		t.Errorf("worker scheduler %q, group annotation %q", w.Spec.SchedulerName, w.Annotations[annotationVolcanoGroup])
	}
}

// TestPodGroupKeepsWhatTheJobLeavesUnset: volcano sets the queue of a
// PodGroup created without one; the controller neither overwrites it nor
// writes a PodGroup that has not changed.
func TestPodGroupKeepsWhatTheJobLeavesUnset(t *testing.T) {
	f := newFixture(t)
	f.cfg.GangSchedulerName = "volcano"
	job := newTestJob("pi", 3)
	f.jobs = append(f.jobs, job)
	pg := newPodGroup(defaulted(job), 4)
	pg.Spec.Queue, pg.Spec.PriorityClassName = "team-a", "high"
	f.groups = append(f.groups, pg)

	f.sync(job)
	if len(f.podGroups.updated) != 0 || len(f.podGroups.created) != 0 {
		t.Errorf("PodGroup written: created %v, updated %v", f.podGroups.created, f.podGroups.updated)
	}
}

// TestPodGroupTakesTheJobsQueue: a queue the job names wins.
func TestPodGroupTakesTheJobsQueue(t *testing.T) {
	f := newFixture(t)
	f.cfg.GangSchedulerName = "volcano"
	job := newTestJob("pi", 3)
	job.Spec.RunPolicy = &common.RunPolicy{SchedulingPolicy: &common.SchedulingPolicy{Queue: "research"}}
	f.jobs = append(f.jobs, job)
	pg := newPodGroup(defaulted(job), 4)
	pg.Spec.Queue = "default"
	f.groups = append(f.groups, pg)

	f.sync(job)
	if len(f.podGroups.updated) != 1 || f.podGroups.updated[0].Spec.Queue != "research" {
		t.Errorf("PodGroup updates %v, want one to queue research", f.podGroups.updated)
	}
}

// TestFinishedJobDeletesPodGroup: a finished job whose pods are cleaned up
// loses its PodGroup; one that keeps its pods keeps it.
func TestFinishedJobDeletesPodGroup(t *testing.T) {
	for policy, want := range map[common.CleanPodPolicy][]string{
		common.CleanPodPolicyRunning: {"pi"},
		common.CleanPodPolicyAll:     {"pi"},
		common.CleanPodPolicyNone:    nil,
	} {
		t.Run(string(policy), func(t *testing.T) {
			f := newFixture(t)
			f.cfg.GangSchedulerName = "volcano"
			job := finishedJob(f, nil, testNow)
			job.Spec.CleanPodPolicy = &policy
			f.groups = append(f.groups, newPodGroup(defaulted(job), 2))
			f.sync(job)
			if diff := cmp.Diff(want, f.podGroups.deleted, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("PodGroups deleted (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodGroupFollowsResize(t *testing.T) {
	f := newFixture(t)
	f.cfg.GangSchedulerName = "volcano"
	job := newTestJob("pi", 4)
	f.jobs = append(f.jobs, job)
	old := newPodGroup(defaulted(job), 3)
	f.groups = append(f.groups, old)

	f.sync(job)
	if len(f.podGroups.updated) != 1 || f.podGroups.updated[0].Spec.MinMember != 5 {
		t.Fatalf("PodGroup updates %v, want one with minMember 5", f.podGroups.updated)
	}
}

func TestChildNotControlledStopsSync(t *testing.T) {
	foreign := metav1.ObjectMeta{Namespace: "ns", Labels: map[string]string{labelApp: "pi", labelMPIJobName: "pi", labelMPIRole: roleLauncher}}
	named := func(name string) metav1.ObjectMeta { m := *foreign.DeepCopy(); m.Name = name; return m }
	cases := map[string]struct {
		setup func(f *fixture)
		want  []action
	}{
		// The files, the ServiceAccount and the Role are written in
		// parallel: the others are created, the RoleBinding only after its
		// Role, and no pod.
		"ConfigMap": {
			setup: func(f *fixture) { f.cms = append(f.cms, &corev1.ConfigMap{ObjectMeta: named("pi-config")}) },
			want: []action{create("serviceaccounts", "pi-launcher"), create("roles", "pi-launcher"),
				create("rolebindings", "pi-launcher")},
		},
		"ServiceAccount": {
			setup: func(f *fixture) { f.sas = append(f.sas, &corev1.ServiceAccount{ObjectMeta: named("pi-launcher")}) },
			want:  []action{create("configmaps", "pi-config"), create("roles", "pi-launcher")},
		},
		"Role": {
			setup: func(f *fixture) { f.roles = append(f.roles, &rbacv1.Role{ObjectMeta: named("pi-launcher")}) },
			want:  []action{create("configmaps", "pi-config"), create("serviceaccounts", "pi-launcher")},
		},
		"RoleBinding": {
			setup: func(f *fixture) {
				f.bindings = append(f.bindings, &rbacv1.RoleBinding{ObjectMeta: named("pi-launcher")})
			},
			want: []action{create("configmaps", "pi-config"), create("serviceaccounts", "pi-launcher"),
				create("roles", "pi-launcher")},
		},
		"launcher Pod": {
			setup: func(f *fixture) { f.pods = append(f.pods, &corev1.Pod{ObjectMeta: named("pi-launcher")}) },
		},
		"worker Pod": {
			setup: func(f *fixture) {
				m := named("pi-worker-0")
				m.Labels = map[string]string{}
				f.pods = append(f.pods, &corev1.Pod{ObjectMeta: m})
			},
			// Its name never reaches the Role, and no pod is created.
			want: []action{create("configmaps", "pi-config"), create("serviceaccounts", "pi-launcher"),
				create("roles", "pi-launcher"), create("rolebindings", "pi-launcher")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			job := newTestJob("pi", 1)
			f.jobs = append(f.jobs, job)
			tc.setup(f)
			_, err := f.syncErr(job)
			if !errors.Is(err, reconcile.ErrResourceExists) {
				t.Fatalf("sync error = %v, want reconcile.ErrResourceExists", err)
			}
			f.expectKubeWrites(tc.want...)
			if events := f.events(); !slices.ContainsFunc(events, func(e string) bool { return strings.HasPrefix(e, "Warning ErrResourceExists ") }) {
				t.Errorf("events %q lack a Warning ErrResourceExists", events)
			}
		})
	}
}

// runningJob sets up a job whose children exist and whose workers and
// launcher are Running, as after a few syncs.
func runningJob(f *fixture, workers int32) *kubeflow.MPIJob {
	job := newTestJob("pi", workers)
	var names []string
	var indices []int
	for i := range int(workers) {
		names = append(names, workerName(job, i))
		indices = append(indices, i)
	}
	f.withChildren(job, elastic.Hosts{Desired: names, Running: names}, names)
	f.pods = append(f.pods, existingWorkers(job, corev1.PodRunning, indices...)...)
	launcher := existingLauncher(job, corev1.PodRunning)
	launcher.Annotations = map[string]string{elastic.AnnotationHostsHash: elastic.HostsHash(f.cms[0].Data[discoverHostsKey])}
	f.pods = append(f.pods, launcher)
	now := metav1.NewTime(testNow.Add(-time.Hour))
	job.Status = common.JobStatus{
		Conditions: []common.JobCondition{
			{Type: common.JobCreated, Status: corev1.ConditionTrue, Reason: reconcile.ReasonCreated, Message: "MPIJob ns/pi is created.", LastUpdateTime: now, LastTransitionTime: now},
			{Type: common.JobRunning, Status: corev1.ConditionTrue, Reason: reconcile.ReasonRunning, Message: "MPIJob ns/pi is running.", LastUpdateTime: now, LastTransitionTime: now},
		},
		ReplicaStatuses: map[common.ReplicaType]*common.ReplicaStatus{
			kubeflow.MPIReplicaTypeLauncher: {Active: 1},
			kubeflow.MPIReplicaTypeWorker:   {Active: workers, Selector: workerSelector(job).String()},
		},
		StartTime:         &now,
		LastReconcileTime: &now,
	}
	f.jobs = append(f.jobs, job)
	return job
}

// TestSyncWritesNothing: a sync of a job with nothing to do writes and
// tells nothing, and comes back only for a deadline still to come.
func TestSyncWritesNothing(t *testing.T) {
	cases := []struct {
		name        string
		setup       func(f *fixture) *kubeflow.MPIJob
		wantRequeue time.Duration
	}{
		{name: "steady state", setup: func(f *fixture) *kubeflow.MPIJob { return runningJob(f, 2) }},
		{name: "active deadline not yet", wantRequeue: 100 * time.Second, setup: func(f *fixture) *kubeflow.MPIJob {
			job := runningJob(f, 1)
			job.Spec.RunPolicy = &common.RunPolicy{ActiveDeadlineSeconds: ptr[int64](3700)}
			return job
		}},
		{name: "TTL not yet", wantRequeue: 40 * time.Second, setup: func(f *fixture) *kubeflow.MPIJob {
			return finishedJob(f, ptr[int32](60), testNow.Add(-20*time.Second))
		}},
		{name: "same name in another namespace is ignored", setup: func(f *fixture) *kubeflow.MPIJob {
			job := runningJob(f, 2)
			other := newTestJob("pi", 5)
			other.Namespace, other.UID = "other", "other-uid"
			f.pods = append(f.pods, existingWorkers(other, corev1.PodRunning, 2, 3, 4)...)
			return job
		}},
		{name: "deleted job is forgotten", setup: func(*fixture) *kubeflow.MPIJob { return newTestJob("gone", 1) }},
		{name: "worker of another owner is not counted", setup: func(f *fixture) *kubeflow.MPIJob {
			job := runningJob(f, 1)
			stray := existingWorkers(job, corev1.PodRunning, 7)[0]
			stray.OwnerReferences[0].UID = types.UID("someone-else")
			f.pods = append(f.pods, stray)
			return job
		}},
		{name: "elastic failure reported once", setup: func(f *fixture) *kubeflow.MPIJob {
			job := elasticJob(f, 2, 1)
			f.pods[1].Status.Phase = corev1.PodFailed
			f.pods[1].Annotations = map[string]string{elastic.AnnotationReplacedBy: "pi-worker-2"}
			f.pods = append(f.pods, existingWorkers(job, corev1.PodRunning, 2)...)
			hosts := []string{"pi-worker-0", "pi-worker-2"}
			f.setFiles(job, elastic.Hosts{Desired: hosts, Running: hosts}, elastic.State{NextIndex: 3})
			f.roles[0] = newLauncherRole(defaulted(job), hosts)
			job.Status.ReplicaStatuses[kubeflow.MPIReplicaTypeWorker].Failed = 1
			return job
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			job := tc.setup(f)
			if d := f.sync(job); d != tc.wantRequeue {
				t.Errorf("requeue = %v, want %v", d, tc.wantRequeue)
			}
			f.expectKubeWrites()
			f.expectMPIWrites()
			if e := f.events(); len(e) != 0 {
				t.Errorf("events: %q", e)
			}
		})
	}
}

func TestLauncherRunningMarksJobRunning(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 2)
	job.Status.Conditions = job.Status.Conditions[:1]
	f.sync(job)
	f.expectKubeWrites()
	f.expectMPIWrites(statusUpdate())
	st := f.writtenStatus()
	if !conditions.Has(st.Conditions, common.JobRunning) {
		t.Errorf("conditions %+v lack Running", st.Conditions)
	}
	if st.ReplicaStatuses[kubeflow.MPIReplicaTypeLauncher].Active != 1 || st.ReplicaStatuses[kubeflow.MPIReplicaTypeWorker].Active != 2 {
		t.Errorf("replica statuses %+v %+v", st.ReplicaStatuses[kubeflow.MPIReplicaTypeLauncher], st.ReplicaStatuses[kubeflow.MPIReplicaTypeWorker])
	}
	if diff := cmp.Diff([]string{"Normal MPIJobRunning MPIJob ns/pi is running."}, f.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestNotRunningUntilAllWorkersRun(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 2)
	job.Status.Conditions = job.Status.Conditions[:1]
	f.pods[1].Status.Phase = corev1.PodPending
	f.setFiles(job, elastic.Hosts{Desired: []string{"pi-worker-0", "pi-worker-1"}, Running: []string{"pi-worker-0"}}, elastic.State{})
	f.syncCountsDue(job)
	f.expectKubeWrites()
	st := f.writtenStatus()
	if conditions.Has(st.Conditions, common.JobRunning) {
		t.Errorf("Running with a Pending worker: %+v", st.Conditions)
	}
}

func TestLauncherSucceeded(t *testing.T) {
	for _, tc := range []struct {
		policy  common.CleanPodPolicy
		deletes []action
	}{
		{common.CleanPodPolicyNone, nil},
		{common.CleanPodPolicyRunning, []action{del("pods", "pi-worker-0")}},
		{common.CleanPodPolicyAll, []action{del("pods", "pi-worker-0"), del("pods", "pi-worker-1")}},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			f := newFixture(t)
			job := runningJob(f, 2)
			job.Spec.CleanPodPolicy = &tc.policy
			f.pods[1].Status.Phase = corev1.PodSucceeded
			f.pods[2].Status.Phase = corev1.PodSucceeded
			st, events := f.syncRecordingEnd(job)
			// The discovery script is emptied before any worker goes.
			f.expectKubeWrites(append([]action{update("configmaps", "pi-config")}, tc.deletes...)...)
			f.expectListed()
			if !conditions.Has(st.Conditions, common.JobSucceeded) || conditions.Has(st.Conditions, common.JobRunning) {
				t.Errorf("conditions %+v, want Succeeded and Running False", st.Conditions)
			}
			if c := conditions.Find(st.Conditions, common.JobRunning); c == nil || c.Status != corev1.ConditionFalse {
				t.Errorf("Running condition %+v, want kept as False", c)
			}
			if st.CompletionTime == nil || !st.CompletionTime.Time.Equal(testNow) {
				t.Errorf("completionTime %v", st.CompletionTime)
			}
			if st.ReplicaStatuses[kubeflow.MPIReplicaTypeLauncher].Succeeded != 1 {
				t.Errorf("launcher status %+v", st.ReplicaStatuses[kubeflow.MPIReplicaTypeLauncher])
			}
			if len(events) == 0 || events[len(events)-1] != "Normal MPIJobSucceeded MPIJob ns/pi successfully completed." {
				t.Errorf("events %q", events)
			}
		})
	}
}

func TestCleanPodPolicyFromRunPolicy(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 1)
	all := common.CleanPodPolicyAll
	job.Spec.RunPolicy = &common.RunPolicy{CleanPodPolicy: &all}
	f.pods[1].Status.Phase = corev1.PodSucceeded
	f.syncRecordingEnd(job)
	f.expectKubeWrites(update("configmaps", "pi-config"), del("pods", "pi-worker-0"))
}

func TestLauncherFailed(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 1)
	failedLauncher(f, 1)
	st, events := f.syncRecordingEnd(job)
	f.expectKubeWrites(update("configmaps", "pi-config"))
	const wantMsg = "MPIJob ns/pi has failed: its launcher exited with code 1."
	if c := conditions.Find(st.Conditions, common.JobFailed); c == nil || c.Reason != reconcile.ReasonFailed || c.Message != wantMsg {
		t.Errorf("Failed condition %+v, want reason %s message %q", c, reconcile.ReasonFailed, wantMsg)
	}
	if st.ReplicaStatuses[kubeflow.MPIReplicaTypeLauncher].Failed != 1 {
		t.Errorf("launcher failed count %d", st.ReplicaStatuses[kubeflow.MPIReplicaTypeLauncher].Failed)
	}
	if len(events) != 1 || !strings.HasPrefix(events[0], "Warning "+reconcile.ReasonFailed+" ") {
		t.Errorf("events %q", events)
	}
}

// failedLauncher makes the fixture's launcher fail with the exit code.
func failedLauncher(f *fixture, code int32) {
	l := launcherOf(f)
	l.Status.Phase = corev1.PodFailed
	l.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "launcher",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}}
}

func TestExitCodeRestartsLauncherWithinBackoffLimit(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 1)
	job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher].RestartPolicy = common.RestartPolicyExitCode
	job.Spec.RunPolicy = &common.RunPolicy{BackoffLimit: ptr[int32](2)}
	failedLauncher(f, 137)

	// The failure is recorded first; the pod stays until the cache shows
	// that record.
	f.sync(job)
	f.expectKubeWrites()
	f.expectMPIWrites(statusUpdate())
	st := f.writtenStatus()
	if !conditions.Has(st.Conditions, common.JobRestarting) || conditions.Has(st.Conditions, common.JobRunning) {
		t.Errorf("conditions %+v, want Restarting without Running", st.Conditions)
	}
	if got := st.ReplicaStatuses[kubeflow.MPIReplicaTypeLauncher].Failed; got != 1 {
		t.Errorf("launcher failures %d, want 1", got)
	}

	// With the record in the cache, the pod goes; the failure is not
	// counted twice.
	job.Status = st
	f.sync(job)
	f.expectKubeWrites(del("pods", "pi-launcher"))
	f.expectMPIWrites()
}

// TestEvictedLauncherIsRecreated: an evicted launcher is restarted whatever
// its restart policy, as the upstream operator did; the job does not fail.
func TestEvictedLauncherIsRecreated(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 1) // restartPolicy Never by default
	l := f.pods[1]
	l.Status.Phase, l.Status.Reason = corev1.PodFailed, "Evicted"

	f.sync(job)
	f.expectKubeWrites()
	st := f.writtenStatus()
	c := conditions.Find(st.Conditions, common.JobRestarting)
	want := "MPIJob ns/pi is restarting its launcher after eviction (failure 1) (launcher pod uid pi-launcher-uid)."
	if c == nil || c.Reason != reconcile.ReasonEvicted || c.Message != want {
		t.Errorf("Restarting condition %+v, want reason %s message %q", c, reconcile.ReasonEvicted, want)
	}
	if conditions.Finished(st.Conditions) {
		t.Errorf("conditions %+v: an evicted launcher finished the job", st.Conditions)
	}
	if e := f.events(); len(e) != 1 || e[0] != "Warning "+reconcile.ReasonEvicted+" "+want {
		t.Errorf("events %q", e)
	}

	// Recorded: the pod is deleted, and once it has left the cache a new
	// launcher is created.
	job.Status = st
	f.sync(job)
	f.expectKubeWrites(del("pods", "pi-launcher"))
	f.pods = f.pods[:1]
	f.sync(job)
	f.expectKubeWrites(create("pods", "pi-launcher"))
}

// TestEvictedLauncherCountsAgainstBackoffLimit: evictions are failures for
// runPolicy.backoffLimit.
func TestEvictedLauncherCountsAgainstBackoffLimit(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 1)
	job.Spec.RunPolicy = &common.RunPolicy{BackoffLimit: ptr[int32](1)}
	job.Status.ReplicaStatuses[kubeflow.MPIReplicaTypeLauncher].Failed = 1
	l := f.pods[1]
	l.Status.Phase, l.Status.Reason = corev1.PodFailed, "Evicted"
	f.sync(job)
	st := f.writtenStatus()
	expectConditionTrue(t, st, common.JobFailed, reasonBackoffLimitExceeded, "")
}

// TestLauncherRestartNotDeletedWhenRecordFails: a status write that
// conflicts leaves the failed launcher in place, so no restart happens
// that the status does not count.
func TestLauncherRestartNotDeletedWhenRecordFails(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 1)
	job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher].RestartPolicy = common.RestartPolicyExitCode
	job.Spec.RunPolicy = &common.RunPolicy{BackoffLimit: ptr[int32](1)}
	failedLauncher(f, 137)
	f.expectNoWriteWhileStatusConflicts(job)
}

// expectNoWriteWhileStatusConflicts syncs job twice (a sync, and its retry
// on the same cache) while every status write conflicts, and checks that
// neither sync wrote to any child.
func (f *fixture) expectNoWriteWhileStatusConflicts(job *kubeflow.MPIJob) {
	f.t.Helper()
	for range 2 {
		_, err := f.syncPrepared(job, func(*MPIJobController) {
			refuse(&f.mpiClient.Fake, "update", "mpijobs", apierrors.NewConflict(kubeflow.Resource("mpijobs"), "pi", errors.New("stale")))
		})
		if !apierrors.IsConflict(err) {
			f.t.Fatalf("sync error %v, want the conflict", err)
		}
		f.expectKubeWrites()
	}
}

// syncRecordingEnd syncs a job that is about to finish: the first sync only
// records the end, touching no child; it returns the status and events of
// that sync, and runs a second sync on a cache that shows the status, as the
// job's update event would, whose writes the test then checks.
func (f *fixture) syncRecordingEnd(job *kubeflow.MPIJob) (common.JobStatus, []string) {
	f.t.Helper()
	f.sync(job)
	f.expectKubeWrites()
	st, events := f.writtenStatus(), f.events()
	if !conditions.Finished(st.Conditions) {
		f.t.Fatalf("the first sync did not record the end: %+v", st.Conditions)
	}
	job.Status = st
	f.sync(job)
	return st, events
}

// TestFinishedPodsStayWhenRecordFails: the pods of a job out of retries go
// only once its Failed condition is written; while that write conflicts,
// they stay, so that no retry starts the job again.
func TestFinishedPodsStayWhenRecordFails(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 1)
	job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher].RestartPolicy = common.RestartPolicyOnFailure
	job.Spec.RunPolicy = &common.RunPolicy{BackoffLimit: ptr[int32](3)}
	f.pods[1].Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "launcher", RestartCount: 4}}
	f.expectNoWriteWhileStatusConflicts(job)
}

func TestExitCodeBackoffLimitExceeded(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 1)
	job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher].RestartPolicy = common.RestartPolicyExitCode
	job.Spec.RunPolicy = &common.RunPolicy{BackoffLimit: ptr[int32](2)}
	job.Status.ReplicaStatuses[kubeflow.MPIReplicaTypeLauncher].Failed = 2
	failedLauncher(f, 137)

	st, _ := f.syncRecordingEnd(job)
	// The job is stopped: its running worker goes whatever cleanPodPolicy says.
	f.expectKubeWrites(update("configmaps", "pi-config"), del("pods", "pi-worker-0"))
	expectConditionTrue(t, st, common.JobFailed, reasonBackoffLimitExceeded, "")
}

func TestExitCodePermanentErrorFails(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 1)
	job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher].RestartPolicy = common.RestartPolicyExitCode
	failedLauncher(f, 3)
	f.sync(job)
	st := f.writtenStatus()
	expectConditionTrue(t, st, common.JobFailed, reconcile.ReasonFailed, "")
}

func TestOnFailureBackoffLimitStopsLauncher(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 1)
	job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher].RestartPolicy = common.RestartPolicyOnFailure
	job.Spec.RunPolicy = &common.RunPolicy{BackoffLimit: ptr[int32](3)}
	f.pods[1].Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "launcher", RestartCount: 4}}

	st, _ := f.syncRecordingEnd(job)
	// Backoff failures stop every active pod, whatever cleanPodPolicy says.
	f.expectKubeWrites(update("configmaps", "pi-config"), del("pods", "pi-worker-0"), del("pods", "pi-launcher"))
	expectConditionTrue(t, st, common.JobFailed, reasonBackoffLimitExceeded, "")
}

func TestEvictedWorkerFailsFixedJob(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 2)
	f.pods[1].Status.Phase = corev1.PodFailed
	f.pods[1].Status.Reason = "Evicted"
	f.sync(job)
	st := f.writtenStatus()
	c := conditions.Find(st.Conditions, common.JobFailed)
	if c == nil || c.Reason != reconcile.ReasonEvicted || c.Message != "1/2 workers are evicted" {
		t.Errorf("Failed condition %+v", c)
	}
}

func TestActiveDeadline(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 1)
	job.Spec.RunPolicy = &common.RunPolicy{ActiveDeadlineSeconds: ptr[int64](3600)}
	st, _ := f.syncRecordingEnd(job)
	f.expectKubeWrites(update("configmaps", "pi-config"), del("pods", "pi-worker-0"), del("pods", "pi-launcher"))
	expectConditionTrue(t, st, common.JobFailed, reasonDeadlineExceeded, "activeDeadlineSeconds (3600s)")
}

func finishedJob(f *fixture, ttl *int32, completed time.Time) *kubeflow.MPIJob {
	job := runningJob(f, 1)
	job.Spec.RunPolicy = &common.RunPolicy{TTLSecondsAfterFinished: ttl}
	f.pods[1].Status.Phase = corev1.PodSucceeded
	f.cms[0].Data[discoverHostsKey] = "#!/bin/sh\n"
	done := metav1.NewTime(completed)
	setCondition(&job.Status, common.JobSucceeded, reconcile.ReasonSucceeded, "MPIJob ns/pi successfully completed.", done)
	job.Status.CompletionTime = &done
	job.Status.ReplicaStatuses[kubeflow.MPIReplicaTypeLauncher] = &common.ReplicaStatus{Succeeded: 1}
	return job
}

func TestTTLDeletesFinishedJob(t *testing.T) {
	f := newFixture(t)
	job := finishedJob(f, ptr[int32](60), testNow.Add(-61*time.Second))
	f.sync(job)
	f.expectKubeWrites()
	f.expectMPIWrites(del("mpijobs", "pi"))
}

func TestScaleUpAllowsExecBeforeCreatingWorkers(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 2)
	job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas = ptr[int32](4)
	f.sync(job)
	f.expectKubeWrites(
		update("configmaps", "pi-config"),
		update("roles", "pi-launcher"),
		create("pods", "pi-worker-2"),
		create("pods", "pi-worker-3"),
	)
	role := updatedObject[*rbacv1.Role](f, "roles", "pi-launcher")
	want := []string{"pi-worker-0", "pi-worker-1", "pi-worker-2", "pi-worker-3"}
	if diff := cmp.Diff(want, role.Rules[1].ResourceNames); diff != "" {
		t.Errorf("exec resourceNames (-want +got):\n%s", diff)
	}
	// discover_hosts.sh lists no worker that does not run yet.
	cm := f.expectListed("pi-worker-0", "pi-worker-1")
	f.expectHostfile(cm, want...)
}

func TestScaleDownDrainsBeforeDeleting(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 4)
	job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas = ptr[int32](2)

	if d := f.sync(job); d != 30*time.Second {
		t.Errorf("requeue = %v, want the 30s drain", d)
	}
	// The victims' drain starts once the files no longer list them and the
	// launcher was told.
	f.expectKubeWrites(
		update("configmaps", "pi-config"),
		patchPod("pi-launcher"),
		patchPod("pi-worker-2"),
		patchPod("pi-worker-3"),
	)
	cm := f.expectListed("pi-worker-0", "pi-worker-1")
	f.expectHostfile(cm, "pi-worker-0", "pi-worker-1")
}

func TestDrainedWorkersAreDeletedAfterDrainPeriod(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 4)
	job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas = ptr[int32](2)
	since := testNow.Add(-31 * time.Second).Format(time.RFC3339)
	for _, p := range f.pods[2:4] {
		p.Annotations = map[string]string{elastic.AnnotationDrainingSince: since}
	}
	two := []string{"pi-worker-0", "pi-worker-1"}
	f.setFiles(job, elastic.Hosts{Desired: two, Running: two}, elastic.State{})

	f.sync(job)
	// The Role keeps the victims until their deletion is seen.
	f.expectKubeWrites(del("pods", "pi-worker-2"), del("pods", "pi-worker-3"))
}

func TestWorkerTurningRunningIsDiscovered(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 2)
	two := []string{"pi-worker-0", "pi-worker-1"}
	f.setFiles(job, elastic.Hosts{Desired: two, Running: two[:1]}, elastic.State{})

	f.sync(job)
	f.expectKubeWrites(update("configmaps", "pi-config"), patchPod("pi-launcher"))
	f.expectListed(two...)
}

func TestRefreshLauncherOff(t *testing.T) {
	f := newFixture(t)
	f.cfg.RefreshLauncher = false
	job := runningJob(f, 2)
	two := []string{"pi-worker-0", "pi-worker-1"}
	f.setFiles(job, elastic.Hosts{Desired: two, Running: two[:1]}, elastic.State{})
	f.sync(job)
	f.expectKubeWrites(update("configmaps", "pi-config"))
}

func TestZeroWorkersGrantNoExec(t *testing.T) {
	f := newFixture(t)
	job := newTestJob("pi", 0)
	f.jobs = append(f.jobs, job)
	f.sync(job)
	role := createdObject[*rbacv1.Role](f, "roles", "pi-launcher")
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			if res == "pods/exec" {
				t.Errorf("Role with no workers has an exec rule: %+v", r)
			}
		}
	}
}

func TestInvalidJobFailsWithoutChildren(t *testing.T) {
	f := newFixture(t)
	job := newTestJob("pi", 1)
	delete(job.Spec.MPIReplicaSpecs, kubeflow.MPIReplicaTypeLauncher)
	f.jobs = append(f.jobs, job)
	if d := f.sync(job); d != 0 {
		t.Errorf("requeue = %v, an invalid job must not loop", d)
	}
	f.expectKubeWrites()
	st := f.writtenStatus()
	expectConditionTrue(t, st, common.JobFailed, reasonInvalidSpec, "spec.mpiReplicaSpecs[Launcher]")
	if e := f.events(); len(e) != 1 || !strings.HasPrefix(e[0], "Warning "+reasonInvalidSpec+" ") || !strings.Contains(e[0], "spec.mpiReplicaSpecs[Launcher]") {
		t.Errorf("events %q", e)
	}
}

// TestFailedStatusWriteAnnouncesNothing: when the status write fails, the
// transition it held is neither reported nor counted, so the retry that
// writes it does so exactly once.
func TestFailedStatusWriteAnnouncesNothing(t *testing.T) {
	f := newFixture(t)
	runningJob(f, 1)
	f.pods[1].Status.Phase = corev1.PodSucceeded
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	refuse(&f.mpiClient.Fake, "update", "mpijobs", apierrors.NewConflict(kubeflow.Resource("mpijobs"), "pi", errors.New("stale")))
	before := testutil.ToFloat64(metrics.JobsSuccessful)
	if _, err := c.syncHandler(ctx, "ns/pi"); !apierrors.IsConflict(err) {
		t.Fatalf("sync error %v, want the conflict", err)
	}
	for _, e := range f.events() {
		if strings.Contains(e, reconcile.ReasonSucceeded) {
			t.Errorf("event %q before the status holding it was written", e)
		}
	}
	if got := testutil.ToFloat64(metrics.JobsSuccessful); got != before {
		t.Errorf("jobs_successful_total moved from %v to %v without a status write", before, got)
	}
}

// TestCreationsPerSyncAreBounded: a job that needs more workers than one
// sync creates gets them over several syncs, while its Role names them all
// before the first is created.
func TestCreationsPerSyncAreBounded(t *testing.T) {
	f := newFixture(t)
	job := newTestJob("pi", engine.MaxCreatesPerSync+8)
	f.jobs = append(f.jobs, job)
	f.sync(job)
	created := 0
	for _, a := range writes(f.kubeClient.Actions()) {
		if a.Verb == "create" && a.Resource == "pods" && a.Name != "pi-launcher" {
			created++
		}
	}
	if created != engine.MaxCreatesPerSync {
		t.Errorf("created %d workers in one sync, want %d", created, engine.MaxCreatesPerSync)
	}
	role := createdObject[*rbacv1.Role](f, "roles", "pi-launcher")
	if got := len(role.Rules[1].ResourceNames); got != engine.MaxCreatesPerSync+8 {
		t.Errorf("the Role names %d workers, want all %d", got, engine.MaxCreatesPerSync+8)
	}
}

// A worker whose pod went while discover_hosts.sh lists it is created again
// only once a write of the script has dropped it: the new pod must not
// inherit the old one's listing.
func TestWorkerGoneIsUnlistedBeforeItIsCreatedAgain(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 2)
	f.pods = slices.DeleteFunc(f.pods, func(p *corev1.Pod) bool { return p.Name == "pi-worker-1" })
	f.sync(job)
	f.expectKubeWrites(update("configmaps", "pi-config"), patchPod("pi-launcher"))
	f.expectListed("pi-worker-0")

	f = newFixture(t)
	job = runningJob(f, 2)
	f.pods = slices.DeleteFunc(f.pods, func(p *corev1.Pod) bool { return p.Name == "pi-worker-1" })
	f.setFiles(job, elastic.Hosts{Desired: []string{"pi-worker-0", "pi-worker-1"}, Running: []string{"pi-worker-0"}}, elastic.State{})
	f.sync(job)
	f.expectKubeWrites(create("pods", "pi-worker-1"))
}
