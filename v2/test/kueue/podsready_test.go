package kueue

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubeflow/mpi-operator/test/harness"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

var mpijobs = v2beta1.SchemeGroupVersion.WithResource("mpijobs")

// TestLauncherRetryKeepsPodsReady: with waitForPodsReady, Kueue holds a
// Workload PodsReady while its MPIJob is Running. The launcher pod of an
// admitted, running job fails once, and its launcher Job (restartPolicy
// OnFailure, backoffLimit 3) runs another. Through the retry the MPIJob
// stays Running and its Workload PodsReady: were it to turn False, Kueue
// would block the admission of every other job until it recovered, and,
// with a recoveryTimeout, evict the job for a retry its own policy allows.
// Every change of both conditions is recorded from watch events, so that a
// False in between, however short, is seen.
func TestLauncherRetryKeepsPodsReady(t *testing.T) {
	ns := suite.Namespace(t)
	queue := createQueues(t, ns)
	podsReady := watchCondition(t, ns, workloads, "PodsReady")
	running := watchCondition(t, ns, mpijobs, string(v2beta1.JobRunning))

	job := createJob(t, ns, "retry", queue, func(j *v2beta1.MPIJob) {
		j.Spec.RunPolicy.BackoffLimit = ptr.To[int32](3)
		j.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeLauncher].RestartPolicy = v2beta1.RestartPolicyOnFailure
	})
	wl, wlUID := waitWorkload(t, job, "")
	waitAdmitted(t, job, wl)
	checkRunning(t, job, 2)
	harness.Eventually(t, poll, time.Minute, wl+" to be PodsReady", func() (bool, string) {
		status, reason, msg := condition(getWorkload(t, ns, wl), "PodsReady")
		return status == "True", fmt.Sprintf("PodsReady=%q (%s: %s)", status, reason, msg)
	})

	failed := endLauncher(t, job, corev1.PodFailed, 1, "Error")
	t.Logf("launcher pod %s failed with exit code 1", failed.Name)
	// The Job controller counts the failure and, after its backoff, runs
	// another pod.
	harness.Eventually(t, poll, 2*time.Minute, "the launcher Job to run a second pod", func() (bool, string) {
		lj, err := suite.Kube.BatchV1().Jobs(ns).Get(context.Background(), job.Name+"-launcher", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var pods []string
		again := false
		for _, p := range jobPods(t, job) {
			if p.Labels[labelJobRole] != "launcher" {
				continue
			}
			pods = append(pods, fmt.Sprintf("%s (%s)", p.Name, p.Status.Phase))
			again = again || p.UID != failed.UID && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning
		}
		return again && lj.Status.Failed == 1, fmt.Sprintf("launcher Job: %d failed, %d active; launcher pods %v",
			lj.Status.Failed, lj.Status.Active, pods)
	})
	harness.Eventually(t, poll, 30*time.Second, job.Name+"'s status to count the retry", func() (bool, string) {
		rs := getJob(t, job).Status.ReplicaStatuses[v2beta1.MPIReplicaTypeLauncher]
		return rs != nil && rs.Failed == 1 && rs.Active == 1, fmt.Sprintf("Launcher replica status %+v", rs)
	})
	// Kueue reconciles the Workload on each update of the job: leave it
	// the time to.
	time.Sleep(3 * time.Second)

	got := getJob(t, job)
	if !conditionTrue(got, v2beta1.JobRunning) || conditionTrue(got, v2beta1.JobFailed) || ptr.Deref(got.Spec.RunPolicy.Suspend, false) {
		t.Errorf("%s after the retry: suspend %v, conditions %+v; want Running, not Failed nor suspended",
			job.Name, ptr.Deref(got.Spec.RunPolicy.Suspend, false), got.Status.Conditions)
	}
	current := getWorkload(t, ns, wl)
	for condType, want := range map[string]bool{"Admitted": true, "PodsReady": true, "Evicted": false} {
		if status, reason, msg := condition(current, condType); (status == "True") != want {
			t.Errorf("Workload %s after the retry: %s=%q (%s: %s), want True: %v", wl, condType, status, reason, msg, want)
		}
	}
	wlChanges, jobChanges := podsReady.of(wlUID), running.of(job.UID)
	t.Logf("Workload %s, PodsReady: %v", wl, wlChanges)
	t.Logf("MPIJob %s, Running: %v", job.Name, jobChanges)
	if lost := lostAfterTrue(wlChanges); len(lost) > 0 {
		t.Errorf("Workload %s lost PodsReady while the launcher retried: %v", wl, lost)
	}
	if lost := lostAfterTrue(jobChanges); len(lost) > 0 {
		t.Errorf("MPIJob %s stopped Running while the launcher retried: %v", job.Name, lost)
	}

	// The second launcher pod's end is the job's.
	finishLauncher(t, job)
	waitFinished(t, job, wl)
}

// waitFinished waits until job has succeeded and Kueue has marked its
// Workload Finished.
func waitFinished(t *testing.T, job *v2beta1.MPIJob, workload string) {
	t.Helper()
	harness.Eventually(t, poll, time.Minute, job.Name+" to succeed", func() (bool, string) {
		got := getJob(t, job)
		return conditionTrue(got, v2beta1.JobSucceeded), fmt.Sprintf("conditions %+v", got.Status.Conditions)
	})
	harness.Eventually(t, poll, time.Minute, job.Name+"'s Workload to be Finished", func() (bool, string) {
		status, reason, _ := condition(getWorkload(t, job.Namespace, workload), "Finished")
		return status == "True", fmt.Sprintf("Finished=%q (%s)", status, reason)
	})
}

// conditionTrue tells whether job has a condition of type t that is True.
func conditionTrue(job *v2beta1.MPIJob, t v2beta1.JobConditionType) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// conditionChange is a status or reason that an object's condition took,
// as a watch event brought it.
type conditionChange struct {
	at             time.Time
	uid            types.UID
	rv             string
	status, reason string
}

func (c conditionChange) String() string {
	return fmt.Sprintf("%s %s/%s (rv %s)", c.at.Format("15:04:05.000"), c.status, c.reason, c.rv)
}

// conditionHistory records every change of one condition type of the
// objects of a resource in a namespace, from watch events.
type conditionHistory struct {
	condType string
	mu       sync.Mutex
	changes  []conditionChange
}

// watchCondition starts recording the changes of condType of the objects
// of resource in ns, until t ends.
func watchCondition(t *testing.T, ns string, resource schema.GroupVersionResource, condType string) *conditionHistory {
	t.Helper()
	h := &conditionHistory{condType: condType}
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(suite.Dynamic, 0, ns, nil)
	informer := factory.ForResource(resource).Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    h.observe,
		UpdateFunc: func(_, obj any) { h.observe(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() {
		close(stop)
		factory.Shutdown()
	})
	if !cache.WaitForCacheSync(stop, informer.HasSynced) {
		t.Fatalf("watching %s in %s: the informer did not sync", resource.Resource, ns)
	}
	return h
}

func (h *conditionHistory) observe(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	status, reason, _ := condition(u, h.condType)
	if status == "" {
		return
	}
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.changes) - 1; i >= 0; i-- {
		if last := h.changes[i]; last.uid == u.GetUID() {
			if last.status == status && last.reason == reason {
				return
			}
			break
		}
	}
	h.changes = append(h.changes, conditionChange{at: now, uid: u.GetUID(), rv: u.GetResourceVersion(), status: status, reason: reason})
}

// of returns the recorded changes of the object with the UID given.
func (h *conditionHistory) of(uid types.UID) []conditionChange {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []conditionChange
	for _, c := range h.changes {
		if c.uid == uid {
			out = append(out, c)
		}
	}
	return out
}

// lostAfterTrue returns the changes, after the first to True, to another
// status.
func lostAfterTrue(changes []conditionChange) []conditionChange {
	var lost []conditionChange
	wasTrue := false
	for _, c := range changes {
		wasTrue = wasTrue || c.status == "True"
		if wasTrue && c.status != "True" {
			lost = append(lost, c)
		}
	}
	return lost
}
