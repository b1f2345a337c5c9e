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

// guardState is a job at one early exit of the sync.
type guardState struct {
	name string
	// setup puts the job and its pods into the fixture; the ConfigMap
	// follows from the pods (listRunning) unless hostsCleared.
	setup        func(f *fixture) *kubeflow.MPIJob
	hostsCleared bool
	// status tells whether the main sync may write the job's status (to
	// record its end, or why it is held); it never writes anything else.
	status bool
	// outcome is the condition, "<type> <reason>", that the main sync's
	// status write sets, if it must write one.
	outcome string
}

// wakeEvent is something that brings a job to the sync: before turns the
// fixture's pods into the state before it, after into the state after it,
// and returns how the informers tell the controller of it.
type wakeEvent struct {
	name   string
	before func(f *fixture, job *kubeflow.MPIJob)
	after  func(f *fixture, job *kubeflow.MPIJob) func(c *MPIJobController)
	// urgent tells whether the event queues the job urgently.
	urgent bool
}

// TestEarlyExitsWriteNothing crosses every early exit of the sync with every
// event that wakes a job, urgently or not, runs the sync the event queues,
// and checks that it writes no more than the early exit allows: at most the
// job's status.
func TestEarlyExitsWriteNothing(t *testing.T) {
	for _, state := range guardStates() {
		for _, event := range wakeEvents() {
			t.Run(state.name+"/"+event.name, func(t *testing.T) {
				f := newFixture(t)
				job := state.setup(f)
				event.before(f, job)
				if !state.hostsCleared {
					f.listRunning(job)
				}
				deliver := event.after(f, job)
				ctx, c := f.readyController(nil)
				deliver(c)
				// A pod the job does not control wakes no job: the blocked
				// job's launcher changes then without a sync.
				woken := c.Queue.Len() > 0
				for c.Queue.Len() > 0 {
					key, priority, _ := c.Queue.GetWithPriority()
					if got := priority == 1; got != event.urgent {
						t.Errorf("the event queues the job urgently: %v, want %v", got, event.urgent)
					}
					_, _ = c.syncHandler(ctx, key)
					c.Queue.Done(key)
				}
				if woken && state.outcome != "" {
					f.expectCondition(state.outcome)
				}
				var allowed []action
				if state.status {
					allowed = []action{statusUpdate()}
				}
				f.expectNoWrites("main sync", allowed)
			})
		}
	}
}

// expectCondition checks that the status written holds the condition
// "<type> <reason>", True.
func (f *fixture) expectCondition(want string) {
	f.t.Helper()
	typ, reason, _ := strings.Cut(want, " ")
	expectConditionTrue(f.t, f.writtenStatus(), common.JobConditionType(typ), reason, "")
}

// expectNoWrites checks that the requests since the last check were at
// most allowed, each once, and forgets them.
func (f *fixture) expectNoWrites(path string, allowed []action) {
	f.t.Helper()
	got := append(writes(f.kubeClient.Actions()), writes(f.mpiClient.Actions())...)
	f.kubeClient.ClearActions()
	f.mpiClient.ClearActions()
	var extra []action
	for _, a := range got {
		if i := indexOf(allowed, a); i >= 0 {
			allowed = append(allowed[:i:i], allowed[i+1:]...)
			continue
		}
		extra = append(extra, a)
	}
	if len(extra) > 0 {
		f.t.Errorf("%s wrote %v", path, extra)
	}
}

func indexOf(actions []action, a action) int {
	for i, b := range actions {
		if cmp.Equal(a, b) {
			return i
		}
	}
	return -1
}

func guardStates() []guardState {
	return []guardState{
		{name: "deadline passed", status: true, outcome: "Failed DeadlineExceeded", setup: func(f *fixture) *kubeflow.MPIJob {
			job := elasticJob(f, 2, 1)
			job.Spec.RunPolicy = &common.RunPolicy{ActiveDeadlineSeconds: ptr[int64](60)}
			return job
		}},
		{name: "launcher succeeded", status: true, outcome: "Succeeded MPIJobSucceeded", setup: func(f *fixture) *kubeflow.MPIJob {
			job := elasticJob(f, 2, 1)
			launcherOf(f).Status.Phase = corev1.PodSucceeded
			return job
		}},
		{name: "launcher failed", status: true, outcome: "Failed MPIJobFailed", setup: func(f *fixture) *kubeflow.MPIJob {
			job := elasticJob(f, 2, 1)
			failedLauncher(f, 1)
			return job
		}},
		{name: "launcher over its backoff limit", status: true, outcome: "Failed BackoffLimitExceeded", setup: func(f *fixture) *kubeflow.MPIJob {
			job := elasticJob(f, 2, 1)
			job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher].RestartPolicy = common.RestartPolicyOnFailure
			job.Spec.RunPolicy = &common.RunPolicy{BackoffLimit: ptr[int32](3)}
			launcherOf(f).Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "launcher", RestartCount: 4}}
			return job
		}},
		{name: "evicted worker of a fixed job", status: true, outcome: "Failed MPIJobEvicted", setup: func(f *fixture) *kubeflow.MPIJob {
			job := runningJob(f, 3)
			w := f.pods[0]
			w.Status.Phase, w.Status.Reason = corev1.PodFailed, engine.PodEvicted
			return job
		}},
		{name: "below minReplicas for too long", status: true, outcome: "Failed WorkersBelowMinimum", setup: func(f *fixture) *kubeflow.MPIJob {
			job := elasticJob(f, 4, 3)
			for _, w := range f.pods[1:4] {
				w.Status.Phase = corev1.PodPending
			}
			f.cms[0].Annotations = elastic.State{NextIndex: 4, BelowMinSince: testNow.Add(-time.Hour)}.Annotations()
			return job
		}},
		{name: "finished", hostsCleared: true, status: true, setup: func(f *fixture) *kubeflow.MPIJob {
			job := elasticJob(f, 2, 1)
			launcherOf(f).Status.Phase = corev1.PodSucceeded
			f.cms[0].Data[discoverHostsKey] = "#!/bin/sh\n"
			done := metav1.NewTime(testNow.Add(-time.Minute))
			setCondition(&job.Status, common.JobSucceeded, reconcile.ReasonSucceeded, "MPIJob ns/pi successfully completed.", done)
			job.Status.CompletionTime = &done
			return job
		}},
		{name: "invalid spec before the start", status: true, outcome: "Failed InvalidMPIJobSpec", setup: func(f *fixture) *kubeflow.MPIJob {
			job := elasticJob(f, 2, 1)
			job.Status.Conditions = nil
			job.Spec.SlotsPerWorker = ptr[int32](-1)
			return job
		}},
		{name: "invalid spec held", status: true, outcome: "Blocked InvalidMPIJobSpec", setup: func(f *fixture) *kubeflow.MPIJob {
			job := elasticJob(f, 2, 1)
			job.Spec.MainContainer = "tpyo"
			return job
		}},
		{name: "blocked by a pod holding the launcher's name", status: true, outcome: "Blocked ErrResourceExists", setup: func(f *fixture) *kubeflow.MPIJob {
			job := elasticJob(f, 2, 1)
			launcherOf(f).OwnerReferences = nil
			return job
		}},
		{name: "being deleted", setup: func(f *fixture) *kubeflow.MPIJob {
			job := elasticJob(f, 2, 1)
			job.DeletionTimestamp = &metav1.Time{Time: testNow}
			return job
		}},
		{name: "written through another API version", setup: func(f *fixture) *kubeflow.MPIJob {
			job := elasticJob(f, 2, 1)
			job.ManagedFields = managedBy("kubeflow.org/v2beta1")
			return job
		}},
	}
}

func wakeEvents() []wakeEvent {
	nothingBefore := func(*fixture, *kubeflow.MPIJob) {}
	resize := func(delta int32) func(f *fixture, job *kubeflow.MPIJob) func(c *MPIJobController) {
		return func(_ *fixture, job *kubeflow.MPIJob) func(c *MPIJobController) {
			old := job.DeepCopy()
			spec := job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker]
			spec.Replicas = ptr(*spec.Replicas + delta)
			job.Generation++
			return jobUpdate(old, job)
		}
	}
	return []wakeEvent{
		{
			name:   "worker turns Running",
			urgent: true,
			before: func(f *fixture, _ *kubeflow.MPIJob) { lastWorker(f).Status.Phase = corev1.PodPending },
			after: func(f *fixture, _ *kubeflow.MPIJob) func(c *MPIJobController) {
				return podUpdate(lastWorker(f), func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning })
			},
		},
		{
			name:   "worker fails",
			urgent: true,
			before: nothingBefore,
			after: func(f *fixture, _ *kubeflow.MPIJob) func(c *MPIJobController) {
				return podUpdate(firstRunningWorker(f), func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })
			},
		},
		{
			name:   "worker goes away",
			urgent: true,
			before: nothingBefore,
			after: func(f *fixture, _ *kubeflow.MPIJob) func(c *MPIJobController) {
				gone := firstRunningWorker(f)
				for i, p := range f.pods {
					if p == gone {
						f.pods = append(f.pods[:i:i], f.pods[i+1:]...)
						break
					}
				}
				return func(c *MPIJobController) { c.podEvents.DeleteFunc(gone) }
			},
		},
		{name: "replicas up", urgent: true, before: nothingBefore, after: resize(1)},
		{name: "replicas down", urgent: true, before: nothingBefore, after: resize(-1)},
		{
			name:   "launcher changes",
			before: nothingBefore,
			after: func(f *fixture, _ *kubeflow.MPIJob) func(c *MPIJobController) {
				return podUpdate(launcherOf(f), func(p *corev1.Pod) { p.Labels["touched"] = "yes" })
			},
		},
		{
			name:   "resync",
			before: nothingBefore,
			after: func(_ *fixture, job *kubeflow.MPIJob) func(c *MPIJobController) {
				return jobUpdate(job, job)
			},
		},
	}
}

// jobUpdate tells the controller of an update of a job as the job
// informer's handler does.
func jobUpdate(old, job *kubeflow.MPIJob) func(c *MPIJobController) {
	return func(c *MPIJobController) { c.jobEvents.UpdateFunc(old, job) }
}

// podUpdate changes pod as an update would, and returns how the informer
// tells the controller of it.
func podUpdate(pod *corev1.Pod, change func(*corev1.Pod)) func(c *MPIJobController) {
	old := pod.DeepCopy()
	old.ResourceVersion = "1"
	change(pod)
	pod.ResourceVersion = "2"
	return func(c *MPIJobController) { c.podEvents.UpdateFunc(old, pod) }
}

// listRunning rewrites the job's ConfigMap as the controller left it for
// the fixture's pods: every worker planned, the Running ones listed, its
// bookkeeping kept; the launcher has seen it.
func (f *fixture) listRunning(job *kubeflow.MPIJob) {
	var hosts elastic.Hosts
	for _, p := range f.pods {
		if p.Labels[labelMPIRole] != roleWorker {
			continue
		}
		hosts.Desired = append(hosts.Desired, p.Name)
		if elastic.Discoverable(p) {
			hosts.Running = append(hosts.Running, p.Name)
		}
	}
	f.setFiles(job, hosts, elastic.ParseState(f.cms[0].Annotations))
}

func launcherOf(f *fixture) *corev1.Pod {
	for _, p := range f.pods {
		if p.Labels[labelMPIRole] == roleLauncher {
			return p
		}
	}
	f.t.Fatal("no launcher")
	return nil
}

func lastWorker(f *fixture) *corev1.Pod {
	var last *corev1.Pod
	for _, p := range f.pods {
		if p.Labels[labelMPIRole] == roleWorker {
			last = p
		}
	}
	return last
}

func firstRunningWorker(f *fixture) *corev1.Pod {
	for _, p := range f.pods {
		if p.Labels[labelMPIRole] == roleWorker && p.Status.Phase == corev1.PodRunning {
			return p
		}
	}
	f.t.Fatal("no Running worker")
	return nil
}
