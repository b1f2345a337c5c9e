package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow/mpi-operator/pkg/engine"
	"github.com/kubeflow/mpi-operator/test/harness"
	kubeflow "github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
	"github.com/kubeflow/mpi-operator/v2/pkg/controller"
)

// settled waits until the job has exactly n workers, all Running and
// listed, its status counts them, and it is Running without Resizing.
func settled(t *testing.T, ns, job string, n int) []corev1.Pod {
	t.Helper()
	pods := runningWorkers(t, ns, job, n)
	harness.Eventually(t, poll, waitTimeout, fmt.Sprintf("%s to settle at %d workers", job, n), func() (bool, error) {
		j := getJob(t, ns, job)
		w := j.Status.ReplicaStatuses[kubeflow.MPIReplicaTypeWorker]
		return w != nil && w.Active == int32(n) && jobCondition(j, "Resizing") == nil &&
			hasCondition(j, kubeflow.JobRunning, corev1.ConditionTrue, ""), nil
	})
	return pods
}

// TestElasticScale scales an elastic job 2 -> 4 -> 1 through the scale
// subresource. From the history of its pods, files and status: a new
// worker is listed only once it runs and its name resolves, a victim is
// out of discover_hosts.sh and marked draining before its deletion, which
// comes drainSeconds after the mark, and the job is Resizing during each
// step that lasts longer than the status waits to be written
// (engine.StatusBatchPeriod), and never after a step.
func TestElasticScale(t *testing.T) {
	ns, h := controllerTest(t)
	const drain = 2
	createJob(t, elasticJob(ns, "elastic", 2, 1, 5, drain))
	settled(t, ns, "elastic", 2)

	steps := []int32{4, 1}
	var scaledAt []uint64
	var lasted []time.Duration
	for _, n := range steps {
		start := time.Now()
		scaledAt = append(scaledAt, revision(t, scaleJob(t, ns, "elastic", n)))
		settled(t, ns, "elastic", int(n))
		lasted = append(lasted, time.Since(start))
	}
	holds(t, time.Second, "one worker", func() (bool, string) {
		all := workerPods(t, ns, "elastic", false)
		return len(all) == 1, fmt.Sprintf("workers %v", podNames(all))
	})
	h.finish()

	h.checkWorkerOrder("elastic")
	deletions := h.workerDeletions("elastic")
	if len(deletions) != 3 {
		t.Errorf("%d workers deleted, want 3", len(deletions))
	}
	for _, d := range deletions {
		mark, ok := d.pod.Annotations[annotationDrainingSince]
		if !ok {
			t.Errorf("worker %s was deleted without being marked draining first", d.pod.Name)
			continue
		}
		since, err := time.Parse(time.RFC3339Nano, mark)
		if err != nil {
			t.Errorf("worker %s is marked draining since %q: %v", d.pod.Name, mark, err)
			continue
		}
		if waited := d.seen.Sub(since); waited < drain*time.Second {
			t.Errorf("worker %s was deleted %s after it was marked draining, want %ds at least", d.pod.Name, waited, drain)
		}
	}

	versions := h.jobVersions("elastic")
	for i, from := range scaledAt {
		to := uint64(1<<64 - 1)
		if i+1 < len(scaledAt) {
			to = scaledAt[i+1]
		}
		came, went := false, false
		for _, v := range versions {
			rv := revision(t, v.ResourceVersion)
			if rv <= from || rv >= to {
				continue
			}
			resizing := hasCondition(v, "Resizing", corev1.ConditionTrue, "MPIJobResizing")
			came = came || resizing
			went = went || (came && !resizing)
		}
		// A step that settles before its Resizing condition is due is
		// written once, settled; one that lasts longer shows it.
		long := lasted[i] > 2*engine.StatusBatchPeriod
		if came && !went || long && !came {
			t.Errorf("scaling to %d in %v: Resizing came %t and went %t", steps[i], lasted[i], came, went)
		}
	}
	// One event a step; the deletion of drained workers ends the step that
	// their draining event announced.
	waitForEvent(t, ns, "elastic", corev1.EventTypeNormal, engine.ReasonScalingUp, "Scaling up to ")
	waitForEvent(t, ns, "elastic", corev1.EventTypeNormal, engine.ReasonDraining, "left discover_hosts.sh and will be deleted in")
	for _, e := range jobEvents(t, ns, "elastic") {
		if strings.HasPrefix(e, corev1.EventTypeNormal+"/"+engine.ReasonScaledDown) {
			t.Errorf("event %q: only the draining event announces drained workers", e)
		}
	}
	if spec := getJob(t, ns, "elastic").Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas; *spec != 1 {
		t.Errorf("Worker.replicas is %d, want 1", *spec)
	}
}

// TestFailedWorker has the kubelet evict a Running worker: an elastic job
// replaces it under the index above every index it used and tells so, and
// a job without an elastic policy fails as upstream's does.
func TestFailedWorker(t *testing.T) {
	t.Parallel()
	t.Run("elastic", func(t *testing.T) {
		ns, h := controllerTest(t)
		createJob(t, elasticJob(ns, "replace", 2, 1, 4, 1))
		pods := settled(t, ns, "replace", 2)
		victim := pods[1].Name
		// What a kubelet reports of a worker it evicted, written through the
		// status subresource: the failure itself is what is simulated.
		setPodStatus(t, ns, victim, evict)

		// Indices 0 and 1 were used.
		replacement := workerNames("replace", 2)[0]
		harness.Eventually(t, poll, waitTimeout, "the replacement to run and be listed", func() (bool, error) {
			listed := listedWorkers(t, ns, "replace")
			return slices.Equal(listed, workerNames("replace", 0, 2)) &&
				podPhase(t, ns, replacement) == corev1.PodRunning, nil
		})
		harness.Eventually(t, poll, waitTimeout, victim+" to name its replacement", func() (bool, error) {
			for _, p := range workerPods(t, ns, "replace", false) {
				if p.Name == victim {
					return p.Annotations[annotationReplacedBy] == replacement, nil
				}
			}
			return false, fmt.Errorf("%s is gone", victim)
		})
		waitForEvent(t, ns, "replace", corev1.EventTypeWarning, "WorkerReplaced", victim)
		msg := waitForEvent(t, ns, "replace", corev1.EventTypeWarning, "WorkerReplaced", replacement)
		t.Logf("event: %s", msg)
		job := getJob(t, ns, "replace")
		if !hasCondition(job, kubeflow.JobRunning, corev1.ConditionTrue, "") || jobCondition(job, kubeflow.JobFailed) != nil {
			t.Errorf("the job after a replacement: %s", conditionsOf(job))
		}
		h.finish()
		h.checkWorkerOrder("replace")
		if ever := h.workersEver("replace"); !slices.Equal(ever, workerNames("replace", 0, 1, 2)) {
			t.Errorf("the job had workers %v, want indices 0, 1 and 2", ever)
		}
	})

	t.Run("fixed", func(t *testing.T) {
		t.Parallel()
		ns := suite.Namespace(t)
		startController(t, ns, nil)
		createJob(t, validJob(ns, "evicted", 2))
		pods := runningWorkers(t, ns, "evicted", 2)
		waitForCondition(t, ns, "evicted", kubeflow.JobRunning, "MPIJobRunning")
		// As above: the kubelet's report of an eviction.
		setPodStatus(t, ns, pods[0].Name, evict)
		failed := waitForCondition(t, ns, "evicted", kubeflow.JobFailed, "MPIJobEvicted")
		if hasCondition(failed, kubeflow.JobRunning, corev1.ConditionTrue, "") || failed.Status.CompletionTime == nil {
			t.Errorf("a failed job with conditions %s and completionTime %v", conditionsOf(failed), failed.Status.CompletionTime)
		}
		waitForEvent(t, ns, "evicted", corev1.EventTypeWarning, "MPIJobEvicted", "evicted")
		// The failed job's launcher stops: its Job is suspended.
		harness.Eventually(t, poll, waitTimeout, "the launcher Job of the failed job to be suspended", func() (bool, error) {
			lj := launcherJob(t, ns, "evicted")
			return lj != nil && lj.Spec.Suspend != nil && *lj.Spec.Suspend, nil
		})
		if all := podNames(workerPods(t, ns, "evicted", false)); !slices.Equal(all, workerNames("evicted", 0, 1)) {
			t.Errorf("workers %v after the eviction, want the two of the job's start", all)
		}
	})
}

// podPhase is a pod's phase; empty when it does not exist.
func podPhase(t *testing.T, ns, name string) corev1.PodPhase {
	t.Helper()
	p, err := suite.Kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		if ignoreNotFound(err) != nil {
			t.Fatalf("getting pod %s: %v", name, err)
		}
		return ""
	}
	return p.Status.Phase
}

// TestFlappingJobHeldAtItsBound: with the controller's bound on a job's
// workers at 4, a job of 4 scaled to 1 and straight back to 4 would need 7
// workers while its 3 victims drain. It gets none beyond the bound: it is
// Blocked (WorkersAtBound) saying how many wait, and no more than 4 worker pods
// live at once; once the victims are deleted the 3 new workers come, are
// listed, and the condition goes.
func TestFlappingJobHeldAtItsBound(t *testing.T) {
	t.Parallel()
	ns := suite.Namespace(t)
	runController(t, nil, controller.Config{Namespace: ns, MaxWorkerPods: 4})
	createJob(t, elasticJob(ns, "flap", 4, 1, 4, 5))
	runningWorkers(t, ns, "flap", 4)

	var most atomic.Int64
	done := make(chan struct{})
	var sampling sync.WaitGroup
	sampling.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			n := int64(len(workerPods(t, ns, "flap", true)))
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
		}
	})
	stop := sync.OnceFunc(func() { close(done); sampling.Wait() })
	defer stop()

	scaleJob(t, ns, "flap", 1)
	harness.Eventually(t, poll, waitTimeout, "discover_hosts.sh to list one worker and its 3 victims to drain", func() (bool, error) {
		draining := 0
		for _, p := range workerPods(t, ns, "flap", true) {
			if _, ok := p.Annotations[annotationDrainingSince]; ok {
				draining++
			}
		}
		return len(listedWorkers(t, ns, "flap")) == 1 && draining == 3, nil
	})
	scaleJob(t, ns, "flap", 4)
	blocked := waitForCondition(t, ns, "flap", "Blocked", "WorkersAtBound")
	// How many wait depends on how many victims the regrowth found marked
	// already: one not marked yet is simply kept.
	if msg := jobCondition(blocked, "Blocked").Message; !strings.Contains(msg, "the most it may have at once (4)") ||
		!strings.Contains(msg, "more are created as draining workers go") {
		t.Errorf("the Blocked condition says %q, want it to name the bound of 4 and say that workers wait", msg)
	}
	runningWorkers(t, ns, "flap", 4)
	harness.Eventually(t, poll, waitTimeout, "the Blocked condition to go", func() (bool, error) {
		return !hasCondition(getJob(t, ns, "flap"), "Blocked", corev1.ConditionTrue, "WorkersAtBound"), nil
	})
	stop()
	if n := most.Load(); n > 4 {
		t.Errorf("%d live worker pods at once, want 4 at most", n)
	}
}
