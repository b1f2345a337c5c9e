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
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/util/retry"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/controller"
	"github.com/kubeflow/mpi-operator/test/harness"
)

// schedulingGate holds the workers of a test Pending until the test lets
// them be scheduled, and kwok then runs them.
const schedulingGate = "example.com/hold"

// TestDeadlinePassedListsNoNewWorker: an elastic job past its
// activeDeadlineSeconds whose worker then turns Running never gets that
// worker listed in discover_hosts.sh, and ends Failed with reason
// DeadlineExceeded, as upstream's did.
//
// The window in which that matters is between the deadline and the moment
// the cache shows the job Failed; the API server widens it here by
// refusing, for a while, the status write that fails the job (a
// ValidatingAdmissionPolicy), as a busy API server or a conflict would
// delay it. The job's second worker turns Running in that window.
func TestDeadlinePassedListsNoNewWorker(t *testing.T) {
	ns := env.Namespace(t)
	startController(t, controller.Config{Namespace: ns, RefreshLauncher: true})
	removeHold := holdJobFailures(t, ns)

	job := elasticJob(ns, "late", 2, 1, 2, 0)
	job.Spec.RunPolicy = &common.RunPolicy{ActiveDeadlineSeconds: ptr[int64](15)}
	worker := job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker]
	worker.Template.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: schedulingGate}}
	listed := watchListedHosts(t, ns, "late")
	createJob(t, job)
	waitForFailuresHeld(t, ns, "late", true)

	ungate(t, ns, "late-worker-0")
	waitForHosts(t, ns, "late", hostsOf("late", 0)...)

	start := getJob(t, ns, "late").Status.StartTime
	if start == nil {
		t.Fatal("the job has no startTime")
	}
	time.Sleep(time.Until(start.Add(16 * time.Second)))
	ungate(t, ns, "late-worker-1")
	waitForRunning(t, ns, "late-worker-1")
	// Long enough for the urgent sync, which lists a Running worker within
	// milliseconds, to have acted on the pod's event.
	time.Sleep(3 * time.Second)
	if c := condition(getJob(t, ns, "late"), common.JobFailed); c != nil {
		t.Fatalf("the job is %s already: the window this test is about has closed", c.Reason)
	}
	if got := discoveredHosts(t, ns, "late"); slices.Contains(got, "late-worker-1:1") {
		t.Errorf("discover_hosts.sh lists %v past the deadline", got)
	}

	removeHold()
	waitForFailuresHeld(t, ns, "late", false)
	// The job's update brings it to the sync at once, rather than at the
	// end of the backoff of its refused status writes.
	updateJob(t, ns, "late", func(j *kubeflow.MPIJob) {
		if j.Annotations == nil {
			j.Annotations = map[string]string{}
		}
		j.Annotations["example.com/touched"] = "yes"
	})
	done := waitForCondition(t, ns, "late", common.JobFailed, "DeadlineExceeded")
	if !strings.Contains(condition(done, common.JobFailed).Message, "activeDeadlineSeconds (15s)") {
		t.Errorf("Failed condition %+v", condition(done, common.JobFailed))
	}
	waitForHosts(t, ns, "late")
	for _, script := range listed() {
		if strings.Contains(script, "late-worker-1") {
			t.Errorf("discover_hosts.sh listed late-worker-1 at some point:\n%s", script)
		}
	}
}

// holdJobFailures makes the API server refuse status writes of the
// namespace's MPIJobs that mark them Failed, until the returned function
// is called (or the test ends).
func holdJobFailures(t *testing.T, ns string) func() {
	t.Helper()
	return refuseUpdates(t, "hold-failures-"+ns, ns, admissionv1.Rule{
		APIGroups: []string{kubeflow.GroupName}, APIVersions: []string{"*"}, Resources: []string{"mpijobs/status"},
	}, "!has(object.status.conditions) || !object.status.conditions.exists(c, c.type == 'Failed' && c.status == 'True')",
		"failures are held")
}

// refuseUpdates makes the API server refuse the updates of rule's objects
// in namespace ns for which expression is false, with message, through a
// ValidatingAdmissionPolicy named name, until the returned function is
// called (or the test ends).
func refuseUpdates(t *testing.T, name, ns string, rule admissionv1.Rule, expression, message string) func() {
	t.Helper()
	remove, err := harness.RefuseUpdates(context.Background(), env.Kube, name, ns, rule, expression, message)
	if err != nil {
		t.Fatal(err)
	}
	removed := func() {
		if err := remove(); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(removed)
	return removed
}

// waitForFailuresHeld waits until the API server refuses a status write
// that marks the job Failed, tried as a dry run on the status the
// controller wrote, or, when held is false, accepts it.
func waitForFailuresHeld(t *testing.T, ns, name string, held bool) {
	t.Helper()
	harness.Eventually(t, poll, waitTimeout, fmt.Sprintf("the API server to hold the job's failure: %v", held), func() (bool, error) {
		job := getJob(t, ns, name)
		if job.Status.StartTime == nil {
			return false, nil // the controller has not written the status yet
		}
		job.Status.Conditions = append(job.Status.Conditions, common.JobCondition{
			Type: common.JobFailed, Status: corev1.ConditionTrue, Reason: "Probe", Message: "a dry run",
		})
		_, err := env.MPI.KubeflowV1().MPIJobs(ns).UpdateStatus(context.Background(), job, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case apierrors.IsConflict(err):
			return false, nil
		case err == nil:
			return !held, nil
		case strings.Contains(err.Error(), "failures are held"):
			return held, nil
		}
		return false, err
	})
}

// ungate lets a held pod be scheduled.
func ungate(t *testing.T, ns, name string) {
	t.Helper()
	ctx := context.Background()
	pods := env.Kube.CoreV1().Pods(ns)
	harness.Eventually(t, poll, waitTimeout, "pod "+name, func() (bool, error) {
		_, err := pods.Get(ctx, name, metav1.GetOptions{})
		return err == nil, ignoreNotFound(err)
	})
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Spec.SchedulingGates = slices.DeleteFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == schedulingGate })
		_, err = pods.Update(ctx, p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("ungating %s: %v", name, err)
	}
}

// watchListedHosts records every discover_hosts.sh of the job's ConfigMap
// from now until the test ends; the returned function returns them.
func watchListedHosts(t *testing.T, ns, job string) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := env.Kube.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", job+"-config").String(),
	})
	if err != nil {
		cancel()
		t.Fatalf("watching the ConfigMap: %v", err)
	}
	var mu sync.Mutex
	var scripts []string
	var wg sync.WaitGroup
	wg.Go(func() {
		for ev := range w.ResultChan() {
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
				mu.Lock()
				scripts = append(scripts, cm.Data["discover_hosts.sh"])
				mu.Unlock()
			}
		}
	})
	t.Cleanup(func() {
		cancel()
		w.Stop()
		wg.Wait()
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		if len(scripts) == 0 {
			t.Fatalf("no version of %s-config was seen", job)
		}
		return slices.Clone(scripts)
	}
}
