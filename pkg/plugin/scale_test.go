package plugin

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
)

// oneWorkerJob is a job "solo" of one Running, listed worker (1 to 3).
func oneWorkerJob(t *testing.T, api API) *fakeCluster {
	job, err := buildObject(api, JobRequest{Name: "solo", Namespace: "ml", Image: "img", Workers: 1, MaxWorkers: 3, Command: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	w0 := worker(api, "solo-worker-0", corev1.PodRunning)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "solo-config", Namespace: "ml"},
		Data:       map[string]string{discoverHostsKey: "#!/bin/sh\n" + hostLine(api, "solo-worker-0")},
	}
	return newFakeCluster(t, api, []runtime.Object{job, w0, cm})
}

// hostLine is the line of discover_hosts.sh that lists a worker of job
// solo, as the operator of the version writes it.
func hostLine(api API, pod string) string {
	if api == APIv2beta1 {
		return "echo " + pod + ".solo.ml.svc\n"
	}
	return "echo " + pod + ":1\n"
}

func worker(api API, name string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", Labels: map[string]string{api.LabelJobName: "solo", api.LabelRole: roleWorker}},
		Status:     corev1.PodStatus{Phase: phase},
	}
}

// TestScaleOutRollsBack: of two new workers one runs and one stays
// Pending; once the timeout passes the replicas go back to 1, and the
// error names the Pending worker with the scheduler's reason.
func TestScaleOutRollsBack(t *testing.T) {
	for _, api := range apis {
		t.Run(api.Version, func(t *testing.T) { testScaleOutRollsBack(t, api) })
	}
}

func testScaleOutRollsBack(t *testing.T, api API) {
	f := oneWorkerJob(t, api)
	kube := f.kube
	ctx := context.Background()
	updates := scaleSubresource(t, f, func(replicas int32) {
		pods := kube.CoreV1().Pods("ml")
		if replicas == 3 {
			for _, p := range []*corev1.Pod{worker(api, "solo-worker-1", corev1.PodRunning), worker(api, "solo-worker-2", corev1.PodPending)} {
				if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
					t.Error(err)
				}
			}
			// The running one is listed.
			cm, err := kube.CoreV1().ConfigMaps("ml").Get(ctx, "solo-config", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cm.Data[discoverHostsKey] += hostLine(api, "solo-worker-1")
			if _, err := kube.CoreV1().ConfigMaps("ml").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				t.Error(err)
			}
			_, _ = kube.CoreV1().Events("ml").Create(ctx, &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: "e", Namespace: "ml"},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "solo-worker-2"},
				Reason:         reasonFailedScheduling, Message: "0/1 nodes are available",
			}, metav1.CreateOptions{})
			return
		}
		// The operator drains the new workers, the Pending one first.
		for _, name := range []string{"solo-worker-1", "solo-worker-2"} {
			p, err := pods.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			p.Annotations = map[string]string{elastic.AnnotationDrainingSince: "2026-05-01T12:00:00Z"}
			if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Error(err)
			}
		}
	})
	out, err := run(t, f, "scale-out", "solo", "--count", "2", "--timeout", "50ms")
	want := `scale-out of mpijob "solo" timed out after 50ms: 1 of 2 new workers not Running and listed
  solo-worker-2: FailedScheduling: 0/1 nodes are available
rolled back to 1 workers; leaving the job: solo-worker-1, solo-worker-2`
	if err == nil || err.Error() != want {
		t.Errorf("scale-out error = %v\nwant %s", err, want)
	}
	if diff := cmp.Diff([]int32{3, 1}, *updates); diff != "" {
		t.Errorf("replicas written (-want +got):\n%s", diff)
	}
	wantOut := "mpijob \"solo\" scaling out from 1 to 3 workers\nmpijob \"solo\": rolling back to 1 workers\n"
	if out != wantOut {
		t.Errorf("output %q, want %q", out, wantOut)
	}
}

// TestScaleOutRefusesAConcurrentChange: the replicas changed between the
// read of the job and the scale: nothing is written.
func TestScaleOutRefusesAConcurrentChange(t *testing.T) {
	f := oneWorkerJob(t, APIv1)
	updates := scaleSubresource(t, f, func(int32) {})
	f.dyn.PrependReactor("get", "mpijobs", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.(clienttesting.GetAction).GetSubresource() == "scale" {
			return true, scaleObject("solo", "ml", 2), nil
		}
		return false, nil, nil
	})
	_, err := run(t, f, "scale-out", "solo", "--count", "1")
	want := `mpijob "solo" has 2 workers now, not 1: it was scaled meanwhile`
	if err == nil || err.Error() != want {
		t.Errorf("scale-out error = %v, want %q", err, want)
	}
	if len(*updates) != 0 {
		t.Errorf("replicas written: %v", *updates)
	}
}

// TestScaleRetriesAConflict: the job's resourceVersion moved between the
// read of its Scale and the update (the operator wrote its status), with
// the count unchanged: the scale reads the Scale again and is written.
func TestScaleRetriesAConflict(t *testing.T) {
	f := oneWorkerJob(t, APIv1)
	updates := scaleSubresource(t, f, func(int32) {})
	conflicts := 0
	f.dyn.PrependReactor("update", "mpijobs", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.(clienttesting.UpdateAction).GetSubresource() != "scale" || conflicts > 0 {
			return false, nil, nil
		}
		conflicts++
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "kubeflow.org", Resource: "mpijobs"}, "solo",
			errors.New("the object has been modified"))
	})
	if err := setReplicas(context.Background(), mustClients(t, f), "solo", 1, 2); err != nil {
		t.Fatalf("setReplicas after a conflict: %v", err)
	}
	if conflicts != 1 {
		t.Errorf("conflicts served = %d, want 1", conflicts)
	}
	if diff := cmp.Diff([]int32{2}, *updates); diff != "" {
		t.Errorf("replicas written (-want +got):\n%s", diff)
	}
}

func mustClients(t *testing.T, f *fakeCluster) *Clients {
	t.Helper()
	c, err := f.env().Clients()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestScaleInByPod marks the named worker with the lowest cost, lowers
// the replicas and waits until the worker is gone.
func TestScaleInByPod(t *testing.T) {
	for _, api := range apis {
		t.Run(api.Version, func(t *testing.T) { testScaleInByPod(t, api) })
	}
}

func testScaleInByPod(t *testing.T, api API) {
	f := oneWorkerJob(t, api)
	kube := f.kube
	ctx := context.Background()
	for _, p := range []*corev1.Pod{worker(api, "solo-worker-1", corev1.PodRunning), worker(api, "solo-worker-2", corev1.PodRunning)} {
		p.Annotations = map[string]string{elastic.AnnotationDeletionCost: "-5"}
		if _, err := kube.CoreV1().Pods("ml").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.setWorkers(t, "solo", 3)
	var costAtScale string
	updates := scaleSubresource(t, f, func(int32) {
		// The operator removes the cheapest worker.
		p, err := kube.CoreV1().Pods("ml").Get(ctx, "solo-worker-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		costAtScale = p.Annotations[elastic.AnnotationDeletionCost]
		if err := kube.CoreV1().Pods("ml").Delete(ctx, "solo-worker-0", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := kube.CoreV1().ConfigMaps("ml").Delete(ctx, "solo-config", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	out, err := run(t, f, "scale-in", "solo", "--pod", "solo-worker-0")
	if err != nil {
		t.Fatal(err)
	}
	want := "mpijob \"solo\" scaling in from 3 to 2 workers\n" +
		"mpijob \"solo\" scaled in to 2 workers: solo-worker-0 left discover_hosts.sh and deleted\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	if costAtScale != "-6" {
		t.Errorf("the victim's pod-deletion-cost when the replicas were lowered = %q, want -6", costAtScale)
	}
	if diff := cmp.Diff([]int32{2}, *updates); diff != "" {
		t.Errorf("replicas written (-want +got):\n%s", diff)
	}
}
