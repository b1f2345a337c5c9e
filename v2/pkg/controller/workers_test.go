package controller

import (
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

func setWorkers(n int32) func(*v2beta1.MPIJob) {
	return func(j *v2beta1.MPIJob) { j.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeWorker].Replicas = ptr(n) }
}

func TestElasticGrow(t *testing.T) {
	f := newFixture(t).start(storedJob(2, withElastic(1, 5)))
	runningJob(t, f, "job-worker-0", "job-worker-1")
	f.updateJob(setWorkers(4))
	f.step()
	f.expectWrites(
		update("configmaps", "job-config"),
		create("pods", "job-worker-2"), create("pods", "job-worker-3"),
		statusUpdate(),
	)
	hostfile, discover := f.files()
	want := "job-worker-0.job.ns.svc slots=1\njob-worker-1.job.ns.svc slots=1\njob-worker-2.job.ns.svc slots=1\njob-worker-3.job.ns.svc slots=1\n"
	if hostfile != want || discover != script("job-worker-0", "job-worker-1") {
		t.Errorf("files: hostfile %q, discover_hosts.sh %q", hostfile, discover)
	}
	f.expectCondition(conditionResizing, "True MPIJobResizing")
	// Running, and once their names resolve, listed; then settled.
	f.refresh()
	f.setPhase(corev1.PodRunning, "job-worker-2", "job-worker-3")
	f.step()
	f.expectListed("job-worker-0", "job-worker-1") // not before the names resolve
	f.refresh()
	f.publish("job", "job-worker-0", "job-worker-1", "job-worker-2", "job-worker-3")
	f.step()
	f.expectListed("job-worker-0", "job-worker-1", "job-worker-2", "job-worker-3")
	f.expectCondition(conditionResizing, "")
}

// TestElasticShrink: victims leave discover_hosts.sh first, are marked
// draining once the written script no longer lists them, and are deleted
// only once drainSeconds have passed; no listed worker is ever deleted.
func TestElasticShrink(t *testing.T) {
	f := newFixture(t).start(storedJob(3, withElastic(1, 5)))
	runningJob(t, f, "job-worker-0", "job-worker-1", "job-worker-2")
	f.updateJob(setWorkers(1))
	d := f.step()
	f.expectWrites(
		update("configmaps", "job-config"),
		patchPod("job-launcher-abcde"),
		patchPod("job-worker-1"), patchPod("job-worker-2"),
		statusUpdate(),
	)
	if d <= 0 || d > 30*time.Second {
		t.Errorf("requeue = %v, want the drain period", d)
	}
	f.expectListed("job-worker-0")
	for _, n := range []string{"job-worker-1", "job-worker-2"} {
		if f.pod(n).Annotations[elastic.AnnotationDrainingSince] == "" {
			t.Errorf("%s not marked draining", n)
		}
	}
	f.step()
	f.expectWrites()
	f.clock.Step(31 * time.Second)
	f.step()
	f.expectWrites(del("pods", "job-worker-1"), del("pods", "job-worker-2"))
	f.expectPods("job-launcher-abcde", "job-worker-0")
	f.step()
	f.expectWrites(statusUpdate())
	f.expectCondition(conditionResizing, "")
}

// TestReplaceFailedWorker: an elastic job replaces a failed worker under an
// index it never used, and records the replacement on the failed pod.
func TestReplaceFailedWorker(t *testing.T) {
	f := newFixture(t).start(storedJob(2, withElastic(1, 5)))
	runningJob(t, f, "job-worker-0", "job-worker-1")
	f.setPhase(corev1.PodFailed, "job-worker-1")
	f.step()
	f.expectWrites(
		update("configmaps", "job-config"),
		patchPod("job-launcher-abcde"), // told of the script without worker 1
		create("pods", "job-worker-2"),
		patchPod("job-worker-1"),
		statusUpdate(),
	)
	if got := f.pod("job-worker-1").Annotations[elastic.AnnotationReplacedBy]; got != "job-worker-2" {
		t.Errorf("replaced-by = %q", got)
	}
	f.expectEvent("Warning WorkerReplaced Worker job-worker-1 ended (Failed) and is out of discover_hosts.sh; replaced by job-worker-2")
	cm, err := f.kube.CoreV1().ConfigMaps("ns").Get(f.ctx, "job-config", metaGet)
	must(t, err)
	if got := cm.Annotations[elastic.AnnotationNextWorkerIndex]; got != "2" {
		t.Errorf("next index %q, want 2", got)
	}
	f.expectListed("job-worker-0")
	// The new worker exists: the next index passes it, and is recorded
	// with the next change of the files rather than by a write of its own.
	f.step()
	f.expectWrites()
}

// TestFixedJobEvictedWorkerFails: a job without an elastic policy cannot
// replace an evicted worker, and fails as the upstream operator's did; its
// launcher Job is then suspended.
func TestFixedJobEvictedWorkerFails(t *testing.T) {
	f := newFixture(t).start(storedJob(2))
	runningJob(t, f, "job-worker-0", "job-worker-1")
	p := f.pod("job-worker-1")
	p.Status.Phase, p.Status.Reason = corev1.PodFailed, "Evicted"
	_, err := f.kube.CoreV1().Pods("ns").UpdateStatus(f.ctx, p, metaUpdate)
	must(t, err)
	f.step()
	f.expectWrites(statusUpdate())
	if c := conditions.Find(f.status().Conditions, v2beta1.JobFailed); c == nil || c.Reason != "MPIJobEvicted" || c.Message != "1/2 workers are evicted" {
		t.Errorf("Failed = %+v", c)
	}
	f.step()
	f.expectWrites(update("jobs", "job-launcher")) // its pod stops; the workers stay (cleanPodPolicy None)
}

// TestBelowMinimumFails: an elastic job that runs fewer than minReplicas
// workers for longer than minReplicasTimeoutSeconds fails; once that is
// recorded, its launcher Job is suspended, so that its pod stops, whatever
// cleanPodPolicy says, and then its workers go as cleanPodPolicy says.
func TestBelowMinimumFails(t *testing.T) {
	cases := map[v2beta1.CleanPodPolicy][]action{
		v2beta1.CleanPodPolicyNone: {update("jobs", "job-launcher")},
		v2beta1.CleanPodPolicyAll: {update("jobs", "job-launcher"), update("configmaps", "job-config"),
			del("pods", "job-worker-0"), del("pods", "job-worker-2")},
	}
	for policy, want := range cases {
		t.Run(string(policy), func(t *testing.T) {
			f := newFixture(t).start(storedJob(2, withElastic(2, 4), func(j *v2beta1.MPIJob) {
				j.Spec.ElasticPolicy.MinReplicasTimeoutSeconds = ptr[int32](60)
				j.Spec.RunPolicy.CleanPodPolicy = ptr(policy)
			}))
			runningJob(t, f, "job-worker-0", "job-worker-1")
			must(t, f.kube.CoreV1().Pods("ns").Delete(f.ctx, "job-worker-1", metaDelete))
			f.step() // replaces it, and starts the clock
			f.refresh()
			f.setPhase(corev1.PodPending, "job-worker-2")
			f.clock.Step(61 * time.Second)
			f.step()
			f.expectCondition(v2beta1.JobFailed, "True WorkersBelowMinimum")
			f.expectWrites(statusUpdate()) // recorded first
			f.step()
			f.expectWrites(want...)
			if lj := f.launcherJob(); lj.Spec.Suspend == nil || !*lj.Spec.Suspend {
				t.Error("the launcher Job of a failed job is not suspended")
			}
			f.step()
			if got := f.writes(); slices.Contains(got, update("jobs", "job-launcher")) {
				t.Errorf("the suspended launcher Job written again: %v", got)
			}
		})
	}
}

func TestListableNeedsTheWorkersOwnEndpoint(t *testing.T) {
	w := func(name, uid string) elastic.Worker {
		p := &corev1.Pod{}
		p.Name, p.UID = name, types.UID(uid)
		return elastic.Worker{Pod: p}
	}
	r := resolvable{"a-uid": "job-worker-0", "b-uid": "job-worker-9"}
	cases := map[string]struct {
		worker elastic.Worker
		want   bool
	}{
		"its endpoint":               {w("job-worker-0", "a-uid"), true},
		"an earlier pod of its name": {w("job-worker-0", "old-uid"), false},
		"its pod under another name": {w("job-worker-1", "b-uid"), false},
		"no endpoint":                {w("job-worker-3", "c-uid"), false},
	}
	for name, tc := range cases {
		if got := r.listable(tc.worker); got != tc.want {
			t.Errorf("%s: listable = %v, want %v", name, got, tc.want)
		}
	}
}

// TestAdoptedWorkersResolveUnderTheirOwnService: a worker that an older
// operator started under the Service <job>-worker is listed by the name
// that Service gives it, once that Service's slice names it.
func TestAdoptedWorkersResolveUnderTheirOwnService(t *testing.T) {
	job := storedJob(1)
	old := newWorker(newTestJob(1), 0, gangScheduler{}, "")
	old.Spec.Subdomain = "job-worker"
	old.Status.Phase = corev1.PodRunning
	f := newFixture(t).start(job, old)
	f.sync()
	f.refresh()
	f.publish("job-worker", "job-worker-0")
	f.step()
	hostfile, discover := f.files()
	if hostfile != "job-worker-0.job-worker.ns.svc slots=1\n" || discover != "#!/bin/sh\necho job-worker-0.job-worker.ns.svc\n" {
		t.Errorf("files: hostfile %q, discover_hosts.sh %q", hostfile, discover)
	}
	f.expectPods("job-worker-0")
}

// TestAdoptedWorkersKeepTheirIndices: the workers of a job whose launcher
// runs as a worker are known by their names, however their replica-index
// labels count: upstream's operator labelled them from 1, this one did
// from 0 before it labelled them as upstream does. None is replaced.
func TestAdoptedWorkersKeepTheirIndices(t *testing.T) {
	for name, first := range map[string]int{"upstream's labels": 1, "labels from 0": 0} {
		t.Run(name, func(t *testing.T) {
			asWorker := func(j *v2beta1.MPIJob) { j.Spec.RunLauncherAsWorker = ptr(true) }
			var pods []runtime.Object
			for i := range 2 {
				p := newWorker(newTestJob(2, asWorker), i, gangScheduler{}, "")
				p.Labels[labelReplicaIndex] = strconv.Itoa(first + i)
				p.Status.Phase = corev1.PodRunning
				pods = append(pods, p)
			}
			f := newFixture(t).start(append(pods, storedJob(2, asWorker))...)
			f.sync()
			for _, w := range f.writes() {
				if w.Resource == "pods" {
					t.Errorf("adopted workers: %v", w)
				}
			}
			f.expectPods("job-worker-0", "job-worker-1")
			if hostfile, _ := f.files(); hostfile != "job-launcher.job.ns.svc slots=1\njob-worker-0.job.ns.svc slots=1\njob-worker-1.job.ns.svc slots=1\n" {
				t.Errorf("hostfile %q", hostfile)
			}
		})
	}
}

// TestStaleCacheRepeatsNoPodWrite: a sync whose cache does not show the
// last sync's pod writes yet repeats none of them, and writes no files
// while a drain mark is not shown.
func TestStaleCacheRepeatsNoPodWrite(t *testing.T) {
	f := newFixture(t).start(storedJob(2))
	f.sync()
	f.kube.ClearActions()
	f.mpi.ClearActions()
	// The Service and Secret it created are not in the cache either: their
	// creation fails as AlreadyExists, which a retry cures.
	if _, err := f.syncErr(); !apierrors.IsAlreadyExists(err) {
		t.Errorf("error %v, want AlreadyExists", err)
	}
	for _, w := range f.writes() {
		if w.Resource == "pods" {
			t.Errorf("repeated %v", w)
		}
	}

	g := newFixture(t).start(storedJob(3, withElastic(1, 3)))
	runningJob(t, g, "job-worker-0", "job-worker-1", "job-worker-2")
	g.updateJob(setWorkers(2))
	g.step()
	g.kube.ClearActions()
	g.mpi.ClearActions()
	g.sync()
	g.expectWrites()
}
