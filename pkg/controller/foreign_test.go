package controller

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

func TestJobNameOfPod(t *testing.T) {
	cases := map[string]string{ // pod name -> job name, "" for none
		"pi-launcher":              "pi",
		"pi-worker-0":              "pi",
		"pi-worker-12":             "pi",
		"a-worker-1-worker-2":      "a-worker-1",
		"my-job-launcher":          "my-job",
		"pi-worker-01":             "",
		"pi-worker-x":              "",
		"pi-worker-":               "",
		"-worker-1":                "",
		"-launcher":                "",
		"web-7d9f8":                "",
		"pi-launcher-worker-three": "",
	}
	for pod, want := range cases {
		got, ok := jobNameOfPod(pod)
		if ok != (want != "") || got != want {
			t.Errorf("jobNameOfPod(%q) = %q, %v; want %q", pod, got, ok, want)
		}
	}
}

// foreignPods are pods that hold the name pi-worker-1 and are not the
// job's, as the informers would cache them.
func foreignPods() map[string]*corev1.Pod {
	meta := func(labels map[string]string, owner *metav1.OwnerReference) metav1.ObjectMeta {
		m := metav1.ObjectMeta{Name: "pi-worker-1", Namespace: "ns", UID: "foreign-uid", Labels: labels}
		if owner != nil {
			m.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		return m
	}
	yes := true
	statefulSet := &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "pi-worker", UID: "sts-uid", Controller: &yes}
	otherJob := &metav1.OwnerReference{APIVersion: "kubeflow.org/v1", Kind: "MPIJob", Name: "pi", UID: "older-pi-uid", Controller: &yes}
	return map[string]*corev1.Pod{
		"bare pod":                    {ObjectMeta: meta(nil, nil)},
		"StatefulSet's pod":           {ObjectMeta: meta(map[string]string{"app": "web"}, statefulSet)},
		"another MPIJob's worker":     {ObjectMeta: meta(podLabels(newTestJob("pi", 1), roleWorker), otherJob)},
		"bare pod with the job label": {ObjectMeta: meta(map[string]string{labelMPIJobName: "pi"}, nil)},
	}
}

// grantedExec returns the pods the Role that a sync wrote lets the launcher
// exec into, or nil when it wrote none.
func grantedExec(f *fixture) []string {
	for _, a := range f.kubeClient.Actions() {
		if a.GetVerb() != "update" && a.GetVerb() != "create" || a.GetResource().Resource != "roles" {
			continue
		}
		var names []string
		role := a.(core.CreateAction).GetObject().(*rbacv1.Role) // an update carries its object alike
		for _, r := range role.Rules {
			if slices.Contains(r.Resources, "pods/exec") {
				names = append(names, r.ResourceNames...)
			}
		}
		return names
	}
	return nil
}

// TestForeignWorkerNameNeverGranted grows a fixed and an elastic job from
// one worker to three while a pod that is not the job's holds the name of
// worker 1. The name never reaches the Role and no pod of that name is
// created; the elastic job takes the next index, the fixed one is Blocked
// with a condition that names the pod.
func TestForeignWorkerNameNeverGranted(t *testing.T) {
	for kind, pod := range foreignPods() {
		t.Run("fixed/"+kind, func(t *testing.T) {
			f := newFixture(t)
			job := runningJob(f, 1)
			*job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas = 3
			f.pods = append(f.pods, pod.DeepCopy())
			_, err := f.syncErr(job)
			var foreign *reconcile.ForeignError
			if !errors.As(err, &foreign) || foreign.Name != "pi-worker-1" {
				t.Fatalf("sync error %v, want pod pi-worker-1 in the way", err)
			}
			if diff := cmp.Diff([]string{"pi-worker-0", "pi-worker-2"}, grantedExec(f)); diff != "" {
				t.Errorf("exec granted (-want +got):\n%s", diff)
			}
			f.expectKubeWrites(update("configmaps", "pi-config"), update("roles", "pi-launcher"), create("pods", "pi-worker-2"))
			expectConditionTrue(t, f.writtenStatus(), conditionBlocked, eventErrResourceExists, `Pod "pi-worker-1" already exists and is not managed by MPIJob pi`)
			if ev := f.events(); !slices.ContainsFunc(ev, func(e string) bool {
				return strings.HasPrefix(e, "Warning ErrResourceExists ") && strings.Contains(e, "pi-worker-1")
			}) {
				t.Errorf("events %q lack a Warning naming the pod", ev)
			}
		})
		t.Run("elastic/"+kind, func(t *testing.T) {
			f := newFixture(t)
			job := elasticJob(f, 1, 1)
			*job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Replicas = 3
			f.pods = append(f.pods, pod.DeepCopy())
			f.syncCountsDue(job)
			if diff := cmp.Diff([]string{"pi-worker-0", "pi-worker-2", "pi-worker-3"}, grantedExec(f)); diff != "" {
				t.Errorf("exec granted (-want +got):\n%s", diff)
			}
			for _, a := range writes(f.kubeClient.Actions()) {
				if a.Name == "pi-worker-1" {
					t.Errorf("the foreign pod's name was written: %v", a)
				}
			}
			st := f.writtenStatus()
			if c := conditions.Find(st.Conditions, conditionBlocked); c != nil {
				t.Errorf("elastic job Blocked: %+v", c)
			}
		})
	}
}

// TestLeavingForeignPodIsWaitedFor: a pod of an earlier job of the same
// name that is being deleted holds its name for a moment; the fixed job
// waits for it without granting it or saying it is blocked, and no
// launcher starts with it in the hostfile.
func TestLeavingForeignPodIsWaitedFor(t *testing.T) {
	f := newFixture(t)
	job := newTestJob("pi", 2)
	f.jobs = append(f.jobs, job)
	old := existingWorkers(newTestJob("pi", 2), corev1.PodRunning, 1)[0]
	old.OwnerReferences[0].UID = "older-pi-uid"
	old.UID = "old-worker-uid"
	old.DeletionTimestamp = &metav1.Time{Time: testNow}
	f.pods = append(f.pods, old)
	f.sync(job)
	f.expectKubeWrites(create("configmaps", "pi-config"), create("serviceaccounts", "pi-launcher"),
		create("roles", "pi-launcher"), create("rolebindings", "pi-launcher"), create("pods", "pi-worker-0"))
	if diff := cmp.Diff([]string{"pi-worker-0"}, grantedExec(f)); diff != "" {
		t.Errorf("exec granted (-want +got):\n%s", diff)
	}
	st := f.writtenStatus()
	if c := conditions.Find(st.Conditions, conditionBlocked); c != nil {
		t.Errorf("Blocked by a pod on its way out: %+v", c)
	}
}

// TestFixedJobWaitsWithItsLauncher: no launcher is created while a worker
// name of a fixed job is held: it would start the ranks on that host.
func TestFixedJobWaitsWithItsLauncher(t *testing.T) {
	f := newFixture(t)
	job := newTestJob("pi", 2)
	f.jobs = append(f.jobs, job)
	f.pods = append(f.pods, foreignPods()["bare pod"])
	if _, err := f.syncErr(job); !errors.Is(err, reconcile.ErrResourceExists) {
		t.Fatalf("sync error %v", err)
	}
	for _, a := range writes(f.kubeClient.Actions()) {
		if a.Resource == "pods" && a.Name == "pi-launcher" {
			t.Errorf("launcher created while a worker name is held")
		}
	}
}

// TestOtherPodEventsEnqueueTheJob: a pod without the job label that takes
// or frees a worker's name brings the job back; other pods do not.
func TestOtherPodEventsEnqueueTheJob(t *testing.T) {
	f := newFixture(t)
	f.jobs = append(f.jobs, newTestJob("pi", 2))
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	pod := func(name string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)}}
	}
	for _, name := range []string{"web-1", "other-worker-1", "pi-worker-x"} {
		c.otherPodEvents.AddFunc(pod(name))
	}
	if n := c.Queue.Len(); n != 0 {
		t.Fatalf("queue holds %d keys for pods that hold no name of an existing job", n)
	}
	c.otherPodEvents.AddFunc(pod("pi-worker-4"))
	if n := c.Queue.Len(); n != 1 {
		t.Fatalf("queue holds %d keys, want the job's", n)
	}
	if key, _ := c.Queue.Get(); key != "ns/pi" {
		t.Errorf("queued %q", key)
	}
}

// TestStrayWorkerIsAdopted: a worker of the job's whose labels were taken
// away is out of the pod cache: its job's sync gives it back the labels by
// which the job's caches and selectors know it, and, while the cache does
// not show it again, creates no worker in its place.
func TestStrayWorkerIsAdopted(t *testing.T) {
	f := newFixture(t)
	job := runningJob(f, 2)
	job.Spec.ElasticPolicy = &kubeflow.ElasticPolicy{}
	stray := f.pods[1]
	stray.Labels = map[string]string{"kept": "yes"}
	wantLabels := podLabels(job, roleWorker)
	wantLabels["kept"] = "yes"

	f.sync(job)
	got, err := f.kubeClient.CoreV1().Pods(job.Namespace).Get(context.Background(), stray.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got.Labels, wantLabels) {
		t.Errorf("labels of the stray %v, want %v", got.Labels, wantLabels)
	}
	for _, a := range f.kubeClient.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "pods" {
			t.Errorf("a pod was created while the stray was being adopted: %v", a)
		}
	}
}
