package controller

import (
	"cmp"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// guardState is a job at one early exit of the sync.
type guardState struct {
	name string
	// setup starts the fixture on a job and brings it to the early exit.
	setup func(t *testing.T, f *fixture)
	// windDown: the sync stops the job's workers, which it may do
	// (stopWorkers): empty discover_hosts.sh, delete workers, suspend the
	// launcher Job.
	windDown bool
	// untouched: the sync writes nothing, not even the status.
	untouched bool
	// outcome is the condition, "<type> <reason>", that the job's status
	// holds True after the sync.
	outcome string
}

// wakeEvent is something that brings a job to the sync: apply changes the
// cluster, and returns how the informers tell the controller of it once
// the caches show the change.
type wakeEvent struct {
	name  string
	apply func(t *testing.T, f *fixture) func()
}

// TestEarlyExitsWriteNothing crosses every early exit of the sync with every
// event that wakes a job, runs the syncs the event drives (urgent or not)
// on the same cache, and checks that they write at most the job's status,
// and, for an early exit that stops the job's workers, what stopping them
// takes, and that discover_hosts.sh lists no worker it did not list before.
func TestEarlyExitsWriteNothing(t *testing.T) {
	for _, state := range guardStates() {
		for _, event := range wakeEvents() {
			t.Run(state.name+"/"+event.name, func(t *testing.T) {
				f := newFixture(t)
				state.setup(t, f)
				f.refresh()
				_, listed := f.files()
				deliver := event.apply(t, f)
				f.refresh()
				drain(f)
				deliver()
				for f.c.Queue.Len() > 0 {
					key, _ := f.c.Queue.Get()
					_, _ = f.c.syncHandler(f.ctx, key)
					f.c.Queue.Done(key)
				}
				var extra []action
				for _, a := range append(f.writes(), f.groups.writes...) {
					if !state.allows(a) {
						extra = append(extra, a)
					}
				}
				if typ, reason, ok := strings.Cut(state.outcome, " "); ok {
					f.expectCondition(v2beta1.JobConditionType(typ), "True "+reason)
				}
				if len(extra) > 0 {
					t.Errorf("the sync wrote %v", extra)
				}
				if _, discover := f.files(); !onlyDropsHosts(listed, discover) {
					t.Errorf("discover_hosts.sh went from\n%s\nto\n%s", listed, discover)
				}
			})
		}
	}
}

// allows tells whether a sync stopped by the early exit may write a.
func (s guardState) allows(a action) bool {
	switch {
	case s.untouched:
		return false
	case a == statusUpdate():
		return true
	case !s.windDown:
		return false
	}
	switch a.Verb + " " + a.Resource {
	case "update configmaps", "delete pods", "update jobs", "delete podgroups":
		return true
	}
	return false
}

// onlyDropsHosts tells whether discover_hosts.sh after lists none but
// hosts that before listed.
func onlyDropsHosts(before, after string) bool {
	was := hostLines(before)
	for _, h := range hostLines(after) {
		if !slices.Contains(was, h) {
			return false
		}
	}
	return true
}

func hostLines(script string) []string {
	var out []string
	for _, l := range strings.Split(script, "\n") {
		if l != "#!/bin/sh" && l != "" {
			out = append(out, l)
		}
	}
	return out
}

// drain empties the queue without syncing: the events the fixture's
// refresh delivered are not the event under test. (Len is exact: it first
// takes in the keys the queue has yet to sort.)
func drain(f *fixture) {
	for f.c.Queue.Len() > 0 {
		key, _ := f.c.Queue.Get()
		f.c.Queue.Done(key)
	}
}

// elasticBase is an elastic job of two workers whose first runs and is
// listed and whose second is Pending.
func elasticBase(t *testing.T, f *fixture, modify ...func(*v2beta1.MPIJob)) {
	f.start(storedJob(2, append([]func(*v2beta1.MPIJob){withElastic(1, 4)}, modify...)...))
	runningJob(t, f, "job-worker-0")
}

func launcherConditions(f *fixture, status batchv1.JobStatus, conds ...batchv1.JobConditionType) {
	for _, c := range conds {
		reason := ""
		switch c {
		case batchv1.JobFailureTarget, batchv1.JobFailed:
			reason = "DeadlineExceeded"
		}
		status.Conditions = append(status.Conditions, batchv1.JobCondition{Type: c, Status: corev1.ConditionTrue, Reason: reason})
	}
	f.setLauncherStatus(status)
}

func guardStates() []guardState {
	return []guardState{
		{name: "suspended", outcome: "Suspended MPIJobSuspended", windDown: true, setup: func(t *testing.T, f *fixture) {
			elasticBase(t, f)
			f.updateJob(suspend(true))
		}},
		{name: "finished", outcome: "Succeeded MPIJobSucceeded", setup: func(t *testing.T, f *fixture) {
			elasticBase(t, f)
			launcherConditions(f, batchv1.JobStatus{Succeeded: 1}, batchv1.JobSuccessCriteriaMet, batchv1.JobComplete)
			f.step()
		}},
		{name: "deadline passed, launcher pod stopping", outcome: "Failed DeadlineExceeded", setup: func(t *testing.T, f *fixture) {
			elasticBase(t, f, func(j *v2beta1.MPIJob) { j.Spec.RunPolicy.ActiveDeadlineSeconds = ptr[int64](60) })
			launcherConditions(f, batchv1.JobStatus{Active: 1}, batchv1.JobFailureTarget)
		}},
		{name: "deadline passed", outcome: "Failed DeadlineExceeded", setup: func(t *testing.T, f *fixture) {
			elasticBase(t, f, func(j *v2beta1.MPIJob) { j.Spec.RunPolicy.ActiveDeadlineSeconds = ptr[int64](60) })
			launcherConditions(f, batchv1.JobStatus{Failed: 1}, batchv1.JobFailureTarget, batchv1.JobFailed)
		}},
		{name: "launcher Job succeeding, its pod stopping", outcome: "Succeeded MPIJobSucceeded", setup: func(t *testing.T, f *fixture) {
			elasticBase(t, f)
			launcherConditions(f, batchv1.JobStatus{Active: 1}, batchv1.JobSuccessCriteriaMet)
		}},
		{name: "launcher Job succeeded", outcome: "Succeeded MPIJobSucceeded", setup: func(t *testing.T, f *fixture) {
			elasticBase(t, f)
			launcherConditions(f, batchv1.JobStatus{Succeeded: 1}, batchv1.JobSuccessCriteriaMet, batchv1.JobComplete)
		}},
		{name: "launcher Job failed", outcome: "Failed BackoffLimitExceeded", setup: func(t *testing.T, f *fixture) {
			elasticBase(t, f)
			f.setLauncherStatus(batchv1.JobStatus{Failed: 2, Conditions: []batchv1.JobCondition{
				{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}})
		}},
		{name: "evicted worker of a fixed job", outcome: "Failed MPIJobEvicted", setup: func(t *testing.T, f *fixture) {
			f.start(storedJob(3))
			runningJob(t, f, "job-worker-0", "job-worker-1")
			p := f.pod("job-worker-0")
			p.Status.Phase, p.Status.Reason = corev1.PodFailed, "Evicted"
			_, err := f.kube.CoreV1().Pods("ns").UpdateStatus(f.ctx, p, metaUpdate)
			must(t, err)
		}},
		{name: "below minReplicas for too long", outcome: "Failed WorkersBelowMinimum", setup: func(t *testing.T, f *fixture) {
			f.start(storedJob(4, withElastic(3, 8)))
			runningJob(t, f, "job-worker-0", "job-worker-1", "job-worker-2")
			f.setPhase(corev1.PodPending, "job-worker-1", "job-worker-2")
			cm, err := f.kube.CoreV1().ConfigMaps("ns").Get(f.ctx, "job-config", metaGet)
			must(t, err)
			for k, v := range (elastic.State{NextIndex: 4, BelowMinSince: testNow.Add(-time.Hour)}).Annotations() {
				cm.Annotations[k] = v
			}
			_, err = f.kube.CoreV1().ConfigMaps("ns").Update(f.ctx, cm, metaUpdate)
			must(t, err)
		}},
		{name: "invalid spec held", outcome: "Blocked InvalidMPIJobSpec", setup: func(t *testing.T, f *fixture) {
			elasticBase(t, f)
			f.updateJob(func(j *v2beta1.MPIJob) {
				j.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeLauncher].Template.Spec.Containers = nil
			})
		}},
		{name: "blocked by a launcher Job of someone else's", outcome: "Blocked ErrResourceExists", setup: func(t *testing.T, f *fixture) {
			elasticBase(t, f)
			lj := f.launcherJob()
			lj.OwnerReferences = nil
			_, err := f.kube.BatchV1().Jobs("ns").Update(f.ctx, lj, metaUpdate)
			must(t, err)
		}},
		{name: "being deleted", untouched: true, setup: func(t *testing.T, f *fixture) {
			elasticBase(t, f)
			f.updateJob(func(j *v2beta1.MPIJob) { j.DeletionTimestamp = &metav1.Time{Time: testNow} })
		}},
		{name: "managed by another controller", untouched: true, setup: func(t *testing.T, f *fixture) {
			elasticBase(t, f)
			f.updateJob(func(j *v2beta1.MPIJob) { j.Spec.RunPolicy.ManagedBy = ptr("kueue.x-k8s.io/multikueue") })
		}},
	}
}

func wakeEvents() []wakeEvent {
	resize := func(delta int32) func(t *testing.T, f *fixture) func() {
		return func(t *testing.T, f *fixture) func() {
			old, err := f.c.jobLister.MPIJobs("ns").Get("job")
			must(t, err)
			f.updateJob(func(j *v2beta1.MPIJob) {
				spec := j.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeWorker]
				spec.Replicas = ptr(*spec.Replicas + delta)
			})
			return func() {
				job, err := f.c.jobLister.MPIJobs("ns").Get("job")
				must(t, err)
				f.c.jobEvents.UpdateFunc(old, job)
			}
		}
	}
	return []wakeEvent{
		{name: "worker turns Running", apply: func(t *testing.T, f *fixture) func() {
			w := workerIn(t, f, corev1.PodPending, true)
			f.setPhase(corev1.PodRunning, w.Name)
			f.publish("job", runningWorkers(f)...)
			return func() {
				f.c.podEvents.UpdateFunc(w, f.cachedPod(t, w.Name))
				f.c.handleSlice(f.cachedSlice(t), true)
			}
		}},
		{name: "worker fails", apply: func(t *testing.T, f *fixture) func() {
			w := workerIn(t, f, corev1.PodRunning, false)
			f.setPhase(corev1.PodFailed, w.Name)
			return func() { f.c.podEvents.UpdateFunc(w, f.cachedPod(t, w.Name)) }
		}},
		{name: "worker goes away", apply: func(t *testing.T, f *fixture) func() {
			w := workerIn(t, f, corev1.PodRunning, false)
			must(t, f.kube.CoreV1().Pods("ns").Delete(f.ctx, w.Name, metaDelete))
			return func() { f.c.podEvents.DeleteFunc(w) }
		}},
		{name: "replicas up", apply: resize(1)},
		{name: "replicas down", apply: resize(-1)},
		{name: "launcher changes", apply: func(t *testing.T, f *fixture) func() {
			old := f.cachedPod(t, "job-launcher-abcde")
			p := f.pod("job-launcher-abcde")
			p.Labels["touched"] = "yes"
			_, err := f.kube.CoreV1().Pods("ns").Update(f.ctx, p, metaUpdate)
			must(t, err)
			return func() { f.c.podEvents.UpdateFunc(old, f.cachedPod(t, p.Name)) }
		}},
		{name: "resync", apply: func(t *testing.T, f *fixture) func() {
			return func() {
				job, err := f.c.jobLister.MPIJobs("ns").Get("job")
				must(t, err)
				f.c.jobEvents.AddFunc(job)
			}
		}},
	}
}

// workerIn returns, as the cache shows it, the last worker that is in
// phase (Pending: not started yet, or no phase at all), or the first when
// last is false.
func workerIn(t *testing.T, f *fixture, phase corev1.PodPhase, last bool) *corev1.Pod {
	t.Helper()
	var found *corev1.Pod
	for _, name := range f.podNames() {
		p := f.cachedPod(t, name)
		if p.Labels[labelJobRole] != roleWorker || cmp.Or(p.Status.Phase, corev1.PodPending) != phase {
			continue
		}
		found = p
		if !last {
			break
		}
	}
	if found == nil {
		t.Fatalf("no worker %s", phase)
	}
	return found
}

func (f *fixture) cachedPod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	p, err := f.c.podLister.Pods("ns").Get(name)
	must(t, err)
	return p
}

func (f *fixture) cachedSlice(t *testing.T) any {
	t.Helper()
	obj, exists, err := f.inf.labelled.Discovery().V1().EndpointSlices().Informer().GetIndexer().GetByKey("ns/job-slice")
	must(t, err)
	if !exists {
		t.Fatal("no EndpointSlice in the cache")
	}
	return obj
}
