package integration

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow/mpi-operator/test/harness"
	kubeflow "github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// nodeLabel selects one of the cluster's kwok nodes (hack/cluster-up.sh
// names them kwok-node-<i> and labels each with its hostname), as the node
// selector of a Kueue flavor does.
const nodeLabel = "kubernetes.io/hostname"

// admit resumes the job as Kueue admits it: in one update, the node
// selector of the flavor it found room in goes into both pod templates and
// the job is unsuspended.
func admit(t *testing.T, ns, name, node string) {
	t.Helper()
	editJob(t, ns, name, func(j *kubeflow.MPIJob) {
		for _, spec := range j.Spec.MPIReplicaSpecs {
			spec.Template.Spec.NodeSelector = map[string]string{nodeLabel: node}
		}
		j.Spec.RunPolicy.Suspend = new(false)
	})
}

// preempt suspends the job as Kueue evicts it: in one update, the job is
// suspended and its pod templates get back what they had before the
// admission.
func preempt(t *testing.T, ns, name string) *kubeflow.MPIJob {
	t.Helper()
	return editJob(t, ns, name, func(j *kubeflow.MPIJob) {
		for _, spec := range j.Spec.MPIReplicaSpecs {
			spec.Template.Spec.NodeSelector = nil
		}
		j.Spec.RunPolicy.Suspend = new(true)
	})
}

// launcherJob returns the job's launcher Job; nil while there is none.
func launcherJob(t *testing.T, ns, job string) *batchv1.Job {
	t.Helper()
	lj, err := suite.Kube.BatchV1().Jobs(ns).Get(context.Background(), job+"-launcher", metav1.GetOptions{})
	if err != nil {
		if ignoreNotFound(err) != nil {
			t.Fatal(err)
		}
		return nil
	}
	return lj
}

// runsOn waits until the job runs on node: its workers, its launcher Job's
// template and its launcher's pod; it returns the workers.
func runsOn(t *testing.T, ns, job string, workers int, node string) []corev1.Pod {
	t.Helper()
	pods := runningWorkers(t, ns, job, workers)
	for _, p := range pods {
		if p.Spec.NodeName != node {
			t.Errorf("worker %s runs on %q, want %s", p.Name, p.Spec.NodeName, node)
		}
	}
	err := poll.Until(context.Background(), waitTimeout, func() (bool, error) {
		lj := launcherJob(t, ns, job)
		return lj != nil && lj.Spec.Suspend != nil && !*lj.Spec.Suspend &&
			maps.Equal(lj.Spec.Template.Spec.NodeSelector, map[string]string{nodeLabel: node}), nil
	})
	if err != nil {
		j := getJob(t, ns, job)
		blocked := ""
		if c := jobCondition(j, "Blocked"); c != nil {
			blocked = c.Message
		}
		t.Fatalf("waiting for the launcher Job to run with the node selector of %s: %v; the job has %s %s",
			node, err, conditionsOf(j), blocked)
	}
	if p := launcherPod(t, ns, job); p.Spec.NodeName != node {
		t.Errorf("the launcher runs on %q, want %s", p.Spec.NodeName, node)
	}
	return pods
}

// TestSuspendResume drives a job as Kueue does: created suspended, it has
// no pods; admitted, it runs where its node selector says; preempted, its
// discover_hosts.sh is emptied before its workers go, and its launcher Job
// is suspended; admitted again, it runs where it is told, an elastic job's
// workers under indices it never used.
func TestSuspendResume(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		elastic bool
		// readmitOn is the node of the second admission.
		readmitOn string
	}{
		{name: "fixed", readmitOn: "kwok-node-1"},
		{name: "elastic", elastic: true, readmitOn: "kwok-node-1"},
		// Kueue admits a job again in whichever flavor has room.
		{name: "fixed-elsewhere", readmitOn: "kwok-node-0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			suspendResume(t, tc.elastic, tc.readmitOn)
		})
	}
}

func suspendResume(t *testing.T, elastic bool, readmitOn string) {
	ns, h := controllerTest(t)
	job := validJob(ns, "queued", 2)
	if elastic {
		job = elasticJob(ns, "queued", 2, 2, 4, 1)
	}
	job.Spec.RunPolicy.Suspend = new(true)
	createJob(t, job)

	queued := waitForCondition(t, ns, "queued", kubeflow.JobSuspended, "MPIJobSuspended")
	if queued.Status.StartTime != nil {
		t.Errorf("a job created suspended has startTime %v", queued.Status.StartTime)
	}
	holds(t, 3*time.Second, "a job created suspended", func() (bool, string) {
		objs := objectsOf(t, ns)
		bad := slices.ContainsFunc(objs, func(o string) bool {
			return strings.HasPrefix(o, "Pod/") || strings.HasPrefix(o, "Job/")
		})
		return !bad, fmt.Sprintf("the namespace holds %v", objs)
	})

	admit(t, ns, "queued", "kwok-node-1")
	first := runsOn(t, ns, "queued", 2, "kwok-node-1")
	running := waitForCondition(t, ns, "queued", kubeflow.JobRunning, "MPIJobRunning")
	if !hasCondition(running, kubeflow.JobSuspended, corev1.ConditionFalse, "MPIJobResumed") || running.Status.StartTime == nil {
		t.Errorf("a resumed job with conditions %s and startTime %v", conditionsOf(running), running.Status.StartTime)
	}

	preemptedAt := revision(t, preempt(t, ns, "queued").ResourceVersion)
	harness.Eventually(t, poll, waitTimeout, "the preempted job to stop", func() (bool, error) {
		lj := launcherJob(t, ns, "queued")
		j := getJob(t, ns, "queued")
		return len(workerPods(t, ns, "queued", false)) == 0 && lj != nil && lj.Spec.Suspend != nil && *lj.Spec.Suspend &&
			hasCondition(j, kubeflow.JobRunning, corev1.ConditionFalse, "") &&
			hasCondition(j, kubeflow.JobSuspended, corev1.ConditionTrue, "MPIJobSuspended"), nil
	})

	admit(t, ns, "queued", readmitOn)
	again := runsOn(t, ns, "queued", 2, readmitOn)
	back := waitForCondition(t, ns, "queued", kubeflow.JobRunning, "MPIJobRunning")
	if !hasCondition(back, kubeflow.JobSuspended, corev1.ConditionFalse, "MPIJobResumed") || back.Status.StartTime == nil {
		t.Errorf("a job resumed again with conditions %s and startTime %v", conditionsOf(back), back.Status.StartTime)
	}
	h.finish()

	h.checkWorkerOrder("queued")
	var stopped []string
	for _, d := range h.workerDeletions("queued") {
		if d.rv > preemptedAt {
			stopped = append(stopped, d.pod.Name)
		}
		if len(d.listed) > 0 {
			t.Errorf("worker %s was deleted while discover_hosts.sh listed %v", d.pod.Name, d.listed)
		}
	}
	slices.Sort(stopped)
	if !slices.Equal(stopped, podNames(first)) {
		t.Errorf("the preemption deleted %v, want every worker: %v", stopped, podNames(first))
	}
	if !elastic {
		if !slices.Equal(podNames(again), workerNames("queued", 0, 1)) {
			t.Errorf("workers %v after the second admission, want the job's indices 0 and 1", podNames(again))
		}
		return
	}
	for _, p := range again {
		if i := workerIndex("queued", p.Name); i <= 1 {
			t.Errorf("worker %s after the second admission: index %d was used before", p.Name, i)
		}
	}
}
