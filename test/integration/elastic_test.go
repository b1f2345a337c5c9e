package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/controller"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/test/harness"
)

func elasticJob(ns, name string, workers, minR, maxR, drain int32) *kubeflow.MPIJob {
	job := newJob(ns, name, workers)
	job.Spec.ElasticPolicy = &kubeflow.ElasticPolicy{
		MinReplicas: ptr(minR), MaxReplicas: ptr(maxR), DrainSeconds: ptr(drain),
	}
	return job
}

func hostsOf(job string, indices ...int) []string {
	var out []string
	for _, i := range indices {
		out = append(out, fmt.Sprintf("%s-worker-%d:1", job, i))
	}
	return out
}

func namesOf(job string, indices ...int) []string {
	var out []string
	for _, i := range indices {
		out = append(out, fmt.Sprintf("%s-worker-%d", job, i))
	}
	return out
}

// patchWorkers changes the worker replicas with a merge patch of the spec,
// as kubectl edit or kubectl patch do.
func patchWorkers(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"mpiReplicaSpecs":{"Worker":{"replicas":%d}}}}`, replicas)
	_, err := env.MPI.KubeflowV1().MPIJobs(ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("patching replicas of %s: %v", name, err)
	}
}

// checkNoDeletionWhileListed watches the namespace's pods until the test
// ends and fails it if a worker is deleted while discover_hosts.sh lists it.
func checkNoDeletionWhileListed(t *testing.T, ns, job string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := env.Kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "mpi-job-role=worker,mpi-job-name=" + job})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || (ev.Type != watch.Deleted && pod.DeletionTimestamp == nil) {
				continue
			}
			if pod.DeletionTimestamp == nil && stillThere(pod) {
				// Its labels were taken away: it left the watch (whose
				// event shows it as it was), not the cluster.
				continue
			}
			if slices.Contains(discoveredHosts(t, ns, job), pod.Name+":1") {
				t.Errorf("worker %s was deleted while discover_hosts.sh listed it", pod.Name)
			}
		}
	})
	t.Cleanup(func() {
		cancel()
		w.Stop()
		wg.Wait()
	})
}

// stillThere tells whether pod exists, not terminating.
func stillThere(pod *corev1.Pod) bool {
	live, err := env.Kube.CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
	return err == nil && live.UID == pod.UID && live.DeletionTimestamp == nil
}

// TestElasticGrowth grows a job from 2 to 4 workers with a patch of its
// spec. The launcher may exec into the new workers before they exist: a
// quota holds their creation back while that is checked.
func TestElasticGrowth(t *testing.T) {
	ns := env.Namespace(t)
	startController(t, controller.Config{Namespace: ns, RefreshLauncher: true})
	createJob(t, elasticJob(ns, "grow", 2, 1, 4, 2))
	waitForHosts(t, ns, "grow", hostsOf("grow", 0, 1)...)
	waitForRunning(t, ns, "grow-launcher")
	all := append(namesOf("grow", 0, 1, 2, 3), "grow-launcher")
	waitForExec(t, ns, "grow", all, namesOf("grow", 0, 1))
	hashBefore := launcherHostsHash(t, ns, "grow")

	ctx := context.Background()
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "hold"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("3")}},
	}
	if _, err := env.Kube.CoreV1().ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, poll, waitTimeout, "the quota to count the pods", func() (bool, error) {
		q, err := env.Kube.CoreV1().ResourceQuotas(ns).Get(ctx, "hold", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		used := q.Status.Used[corev1.ResourcePods]
		return used.Value() == 3, nil
	})

	patchWorkers(t, ns, "grow", 4)
	waitForExec(t, ns, "grow", all, namesOf("grow", 0, 1, 2, 3))
	if got := workerPods(t, ns, "grow"); !slices.Equal(got, namesOf("grow", 0, 1)) {
		t.Fatalf("workers %v exist already; the quota should hold them back", got)
	}
	cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "grow-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// An elastic job's hostfile names new workers with the write that
	// lists the first of them: none is Running yet.
	if want := "grow-worker-0 slots=1\ngrow-worker-1 slots=1\n"; cm.Data["hostfile"] != want {
		t.Errorf("hostfile %q while the new workers are held back, want %q", cm.Data["hostfile"], want)
	}

	if err := env.Kube.CoreV1().ResourceQuotas(ns).Delete(ctx, "hold", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForHosts(t, ns, "grow", hostsOf("grow", 0, 1, 2, 3)...)
	cm, err = env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "grow-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "grow-worker-0 slots=1\ngrow-worker-1 slots=1\ngrow-worker-2 slots=1\ngrow-worker-3 slots=1\n"; cm.Data["hostfile"] != want {
		t.Errorf("hostfile %q once the new workers are listed, want %q", cm.Data["hostfile"], want)
	}
	harness.Eventually(t, poll, waitTimeout, "the launcher to be told of the new hosts", func() (bool, error) {
		return launcherHostsHash(t, ns, "grow") != hashBefore, nil
	})
	harness.Eventually(t, poll, waitTimeout, "the resize to settle", func() (bool, error) {
		job := getJob(t, ns, "grow")
		return condition(job, "Resizing") == nil && condition(job, common.JobRunning) != nil, nil
	})
	waitForEvents(t, ns, "grow", "Normal/WorkersScalingUp")
}

func launcherHostsHash(t *testing.T, ns, job string) string {
	t.Helper()
	p, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), job+"-launcher", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p.Annotations["mpi-operator.kubeflow.org/hosts-hash"]
}

// TestElasticShrinkDrainsFirst scales 4 workers to 1 through the scale
// subresource: the victims leave discover_hosts.sh at once, their pods stay
// for the drain period, and the Role then allows exec on one worker only.
func TestElasticShrinkDrainsFirst(t *testing.T) {
	ns := env.Namespace(t)
	startController(t, controller.Config{Namespace: ns, RefreshLauncher: true})
	createJob(t, elasticJob(ns, "shrink", 4, 1, 4, 3))
	waitForHosts(t, ns, "shrink", hostsOf("shrink", 0, 1, 2, 3)...)
	checkNoDeletionWhileListed(t, ns, "shrink")

	scaleWorkers(t, ns, "shrink", 1)
	waitForHosts(t, ns, "shrink", hostsOf("shrink", 0)...)
	// Draining: out of the script, still there, still allowed.
	if got := workerPods(t, ns, "shrink"); len(got) != 4 {
		t.Errorf("workers right after the shrink: %v, want all 4 draining", got)
	}
	harness.Eventually(t, poll, waitTimeout, "a Resizing condition while the victims drain", func() (bool, error) {
		c := condition(getJob(t, ns, "shrink"), "Resizing")
		return c != nil && c.Status == corev1.ConditionTrue && len(workerPods(t, ns, "shrink")) == 4, nil
	})
	harness.Eventually(t, poll, waitTimeout, "the drained workers to go", func() (bool, error) {
		return slices.Equal(workerPods(t, ns, "shrink"), namesOf("shrink", 0)), nil
	})
	harness.Eventually(t, poll, waitTimeout, "the Resizing condition to clear", func() (bool, error) {
		return condition(getJob(t, ns, "shrink"), "Resizing") == nil, nil
	})
	waitForExec(t, ns, "shrink", namesOf("shrink", 0, 1, 2, 3), namesOf("shrink", 0))
	waitForEvents(t, ns, "shrink", "Normal/WorkersDraining")
	scale, err := env.MPI.KubeflowV1().MPIJobs(ns).GetScale(context.Background(), "shrink", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if scale.Spec.Replicas != 1 || scale.Status.Selector == "" {
		t.Errorf("scale %+v, want replicas 1 and a selector for autoscalers", scale)
	}
}

// TestNamedScaleIn removes chosen workers: a Pending worker goes before any
// Running one, whatever its deletion cost, and among Running workers the
// lowest pod-deletion-cost goes first.
func TestNamedScaleIn(t *testing.T) {
	ns := env.Namespace(t)
	startController(t, controller.Config{Namespace: ns})
	createJob(t, elasticJob(ns, "named", 3, 1, 8, 1))
	waitForHosts(t, ns, "named", hostsOf("named", 0, 1, 2)...)
	checkNoDeletionWhileListed(t, ns, "named")

	// Named scale-in: the user marks worker 0, then lowers replicas.
	setDeletionCost(t, ns, "named-worker-0", "-100")
	scaleWorkers(t, ns, "named", 2)
	waitForHosts(t, ns, "named", hostsOf("named", 1, 2)...)
	harness.Eventually(t, poll, waitTimeout, "worker 0 to go", func() (bool, error) {
		return slices.Equal(workerPods(t, ns, "named"), namesOf("named", 1, 2)), nil
	})

	// A new worker that cannot be scheduled stays Pending; even with a high
	// deletion cost it is the first to go.
	cordonNodes(t)
	scaleWorkers(t, ns, "named", 3)
	harness.Eventually(t, poll, waitTimeout, "a third worker", func() (bool, error) {
		return len(workerPods(t, ns, "named")) == 3, nil
	})
	pending := workerPods(t, ns, "named")[2]
	if phase := podPhase(t, ns, pending); phase != corev1.PodPending {
		t.Fatalf("new worker %s is %s, want Pending on cordoned nodes", pending, phase)
	}
	setDeletionCost(t, ns, pending, "1000")
	scaleWorkers(t, ns, "named", 2)
	harness.Eventually(t, poll, waitTimeout, "the Pending worker to go", func() (bool, error) {
		return slices.Equal(workerPods(t, ns, "named"), namesOf("named", 1, 2)), nil
	})
	if got := discoveredHosts(t, ns, "named"); !slices.Equal(got, hostsOf("named", 1, 2)) {
		t.Errorf("hosts %v, want the Running workers kept", got)
	}
}

func setDeletionCost(t *testing.T, ns, pod, cost string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"controller.kubernetes.io/pod-deletion-cost":%q}}}`, cost)
	if _, err := env.Kube.CoreV1().Pods(ns).Patch(context.Background(), pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// cordonNodes marks every node unschedulable until the test ends.
func cordonNodes(t *testing.T) {
	t.Helper()
	set := func(v bool) error {
		nodes, err := env.Kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, n := range nodes.Items {
			patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, v)
			if _, err := env.Kube.CoreV1().Nodes().Patch(context.Background(), n.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				return err
			}
		}
		return nil
	}
	if err := set(true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := set(false); err != nil {
			t.Errorf("uncordoning nodes: %v", err)
		}
	})
}

// TestElasticWorkerFailure fails and evicts workers of an elastic job: each
// is replaced under a name the job never used, the job keeps running, and
// once it stays below minReplicas longer than allowed it fails.
func TestElasticWorkerFailure(t *testing.T) {
	ns := env.Namespace(t)
	startController(t, controller.Config{Namespace: ns})
	job := elasticJob(ns, "ft", 2, 2, 4, 1)
	job.Spec.ElasticPolicy.MinReplicasTimeoutSeconds = ptr[int32](3)
	createJob(t, job)
	waitForHosts(t, ns, "ft", hostsOf("ft", 0, 1)...)
	waitForRunning(t, ns, "ft-launcher")
	waitForCondition(t, ns, "ft", common.JobRunning, "MPIJobRunning")

	finishPod(t, ns, "ft-worker-1", corev1.PodFailed, 137, "Evicted")
	waitForHosts(t, ns, "ft", hostsOf("ft", 0, 2)...)
	running := getJob(t, ns, "ft")
	if c := condition(running, common.JobFailed); c != nil {
		t.Fatalf("an elastic job failed on one evicted worker: %+v", c)
	}
	waitForEvents(t, ns, "ft", "Warning/WorkerReplaced")
	p, err := env.Kube.CoreV1().Pods(ns).Get(context.Background(), "ft-worker-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Annotations["mpi-operator.kubeflow.org/replaced-by"]; got != "ft-worker-2" {
		t.Errorf("replaced-by %q, want ft-worker-2", got)
	}
	waitForExec(t, ns, "ft", namesOf("ft", 0, 1, 2), namesOf("ft", 0, 2))

	// Below minReplicas: the replacement cannot be scheduled.
	cordonNodes(t)
	finishPod(t, ns, "ft-worker-0", corev1.PodFailed, 1, "")
	waitForHosts(t, ns, "ft", hostsOf("ft", 2)...)
	failed := waitForCondition(t, ns, "ft", common.JobFailed, "WorkersBelowMinimum")
	if c := condition(failed, common.JobFailed); !strings.Contains(c.Message, "minReplicasTimeoutSeconds (3s)") {
		t.Errorf("failure message %q does not name the field", c.Message)
	}
	waitForEvents(t, ns, "ft", "Warning/WorkersBelowMinimum")
}

// TestElasticBoundsAreRejected: the API server refuses elastic bounds that
// contradict each other, and a scale outside them, naming the field.
func TestElasticBoundsAreRejected(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	bad := elasticJob(ns, "bad", 2, 3, 2, 1)
	_, err := env.MPI.KubeflowV1().MPIJobs(ns).Create(ctx, bad, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "spec.elasticPolicy.minReplicas") {
		t.Errorf("min > max: error %v, want one naming spec.elasticPolicy.minReplicas", err)
	}
	outside := elasticJob(ns, "outside", 5, 1, 4, 1)
	_, err = env.MPI.KubeflowV1().MPIJobs(ns).Create(ctx, outside, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "spec.elasticPolicy.maxReplicas") {
		t.Errorf("replicas > max: error %v, want one naming spec.elasticPolicy.maxReplicas", err)
	}

	createJob(t, elasticJob(ns, "ok", 2, 2, 4, 1))
	jobs := env.MPI.KubeflowV1().MPIJobs(ns)
	for replicas, field := range map[int32]string{5: "spec.elasticPolicy.maxReplicas", 1: "spec.elasticPolicy.minReplicas"} {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			scale, err := jobs.GetScale(ctx, "ok", metav1.GetOptions{})
			if err != nil {
				return err
			}
			scale.Spec.Replicas = replicas
			_, err = jobs.UpdateScale(ctx, "ok", scale, metav1.UpdateOptions{})
			return err
		})
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("scale to %d: error %v, want one naming %s", replicas, err, field)
		}
	}
}

// TestFixedJobKeepsUpstreamBehaviour: without an elastic policy a failed
// worker is not replaced, an evicted one fails the job with the upstream
// reason, and a shrink still takes the victim out of discover_hosts.sh
// before deleting it.
func TestFixedJobKeepsUpstreamBehaviour(t *testing.T) {
	ns := env.Namespace(t)
	startController(t, controller.Config{Namespace: ns})
	createJob(t, newJob(ns, "fixed", 3))
	waitForHosts(t, ns, "fixed", hostsOf("fixed", 0, 1, 2)...)
	checkNoDeletionWhileListed(t, ns, "fixed")

	scaleWorkers(t, ns, "fixed", 2)
	waitForHosts(t, ns, "fixed", hostsOf("fixed", 0, 1)...)
	if got := workerPods(t, ns, "fixed"); len(got) != 3 {
		t.Errorf("workers right after the shrink: %v, want worker 2 still draining", got)
	}

	finishPod(t, ns, "fixed-worker-1", corev1.PodFailed, 1, "")
	waitForHosts(t, ns, "fixed", hostsOf("fixed", 0)...)
	if got := workerPods(t, ns, "fixed"); slices.Contains(got, "fixed-worker-3") {
		t.Errorf("a fixed job replaced a failed worker: %v", got)
	}
	finishPod(t, ns, "fixed-worker-0", corev1.PodFailed, 137, "Evicted")
	job := waitForCondition(t, ns, "fixed", common.JobFailed, "MPIJobEvicted")
	if c := condition(job, common.JobFailed); c.Message != "1/3 workers are evicted" {
		t.Errorf("message %q", c.Message)
	}
}

// execNames are the workers the launcher Role of job lets it exec into.
func execNames(t *testing.T, ns, job string) []string {
	t.Helper()
	role, err := env.Kube.RbacV1().Roles(ns).Get(context.Background(), job+"-launcher", metav1.GetOptions{})
	if err != nil {
		return nil
	}
	for _, r := range role.Rules {
		if slices.Contains(r.Resources, "pods/exec") {
			return r.ResourceNames
		}
	}
	return nil
}

// TestFlappingJobHeldAtItsBound: with the controller's bound on a job's
// workers at 4, a job of 4 scaled to 1 and straight back to 4 would need 7
// workers while its 3 victims drain. It gets none beyond the bound: it is
// Blocked (WorkersAtBound) saying how many wait, its Role never names more than 4
// workers and no more than 4 worker pods live at once; once the victims
// are deleted, the 3 new workers come, and the condition goes.
func TestFlappingJobHeldAtItsBound(t *testing.T) {
	ns := env.Namespace(t)
	startController(t, controller.Config{Namespace: ns, MaxWorkerPods: 4})
	createJob(t, elasticJob(ns, "flap", 4, 1, 4, 5))
	for _, w := range namesOf("flap", 0, 1, 2, 3) {
		waitForRunning(t, ns, w)
	}
	waitForHosts(t, ns, "flap", hostsOf("flap", 0, 1, 2, 3)...)
	checkNoDeletionWhileListed(t, ns, "flap")

	// Sample what exists and what the Role names until the end.
	ctx, cancel := context.WithCancel(context.Background())
	var most struct {
		sync.Mutex
		pods, exec int
	}
	var sampling sync.WaitGroup
	sampling.Go(func() {
		for ctx.Err() == nil {
			pods, exec := len(workerPods(t, ns, "flap")), len(execNames(t, ns, "flap"))
			most.Lock()
			most.pods, most.exec = max(most.pods, pods), max(most.exec, exec)
			most.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	})
	defer func() { cancel(); sampling.Wait() }()

	patchWorkers(t, ns, "flap", 1)
	harness.Eventually(t, poll, waitTimeout, "discover_hosts.sh to list one worker and its 3 victims to drain", func() (bool, error) {
		return len(discoveredHosts(t, ns, "flap")) == 1 && drainingWorkers(t, ns, "flap") == 3, nil
	})
	patchWorkers(t, ns, "flap", 4)
	// How many wait depends on how many victims the regrowth found marked
	// already: one not marked yet is simply kept.
	waitForBlocked(t, ns, "flap", "WorkersAtBound", "the most it may have at once (4)", "more are created as draining workers go")

	harness.Eventually(t, poll, waitTimeout, "4 Running workers listed after the victims went", func() (bool, error) {
		return len(discoveredHosts(t, ns, "flap")) == 4 && len(workerPods(t, ns, "flap")) == 4, nil
	})
	harness.Eventually(t, poll, waitTimeout, "the Blocked condition to go", func() (bool, error) {
		c := condition(getJob(t, ns, "flap"), conditionBlocked)
		return c == nil || c.Status != corev1.ConditionTrue, nil
	})
	cancel()
	sampling.Wait()
	if most.pods > 4 || most.exec > 4 {
		t.Errorf("at most %d live worker pods and %d names in the Role at once, want 4 at most", most.pods, most.exec)
	}
	t.Logf("at most %d live worker pods and %d names in the Role at once", most.pods, most.exec)
}

// drainingWorkers counts the job's workers marked draining.
func drainingWorkers(t *testing.T, ns, job string) int {
	t.Helper()
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{
		LabelSelector: "mpi-job-role=worker,mpi-job-name=" + job,
	})
	if err != nil {
		t.Fatalf("listing workers: %v", err)
	}
	n := 0
	for _, p := range pods.Items {
		if _, ok := p.Annotations[elastic.AnnotationDrainingSince]; ok {
			n++
		}
	}
	return n
}
