package plugin

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestLauncherPod finds a v2beta1 launcher among the pods of its Job:
// the newest that has not finished, else the newest; never a pod that
// only carries the Job's label.
func TestLauncherPod(t *testing.T) {
	pod := func(name string, phase corev1.PodPhase, age time.Duration, labels ...string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", CreationTimestamp: ago(age), Labels: map[string]string{}},
			Status:     corev1.PodStatus{Phase: phase},
		}
		ofLauncherJob(p, "demo-launcher")
		if len(labels) > 0 {
			// Only the labels given.
			p.Labels = map[string]string{}
			for _, l := range labels {
				p.Labels[l] = "demo-launcher"
			}
		}
		return p
	}
	stranger := pod("demo-launcher-stray", corev1.PodRunning, time.Second)
	stranger.OwnerReferences = nil
	otherJob := pod("demo-launcher-other", corev1.PodRunning, time.Second)
	otherJob.OwnerReferences[0].Name = "other-launcher"
	deleting := pod("demo-launcher-going", corev1.PodRunning, time.Second)
	deleting.DeletionTimestamp = ptrTo(ago(0))
	cases := []struct {
		name string
		pods []runtime.Object
		want string // empty for none
	}{
		{"the running one over a newer failed one", []runtime.Object{
			pod("demo-launcher-old", corev1.PodFailed, time.Second),
			pod("demo-launcher-run", corev1.PodRunning, time.Minute),
		}, "demo-launcher-run"},
		{"the newest of the finished", []runtime.Object{
			pod("demo-launcher-first", corev1.PodFailed, 2*time.Minute),
			pod("demo-launcher-last", corev1.PodSucceeded, time.Minute),
		}, "demo-launcher-last"},
		{"not one being deleted", []runtime.Object{deleting, pod("demo-launcher-new", corev1.PodPending, 2*time.Second)}, "demo-launcher-new"},
		{"the label of Kubernetes before 1.27", []runtime.Object{pod("demo-launcher-k126", corev1.PodRunning, time.Minute, "job-name")}, "demo-launcher-k126"},
		{"only the Job's own pods", []runtime.Object{stranger, otherJob}, ""},
		{"none", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster(t, APIv2beta1, tc.pods)
			c, err := f.env().Clients()
			if err != nil {
				t.Fatal(err)
			}
			got, err := launcherPod(context.Background(), c, "demo")
			switch {
			case tc.want == "":
				if want := `mpijob "demo" has no launcher pod yet (no pod of Job demo-launcher)`; err == nil || err.Error() != want {
					t.Errorf("launcherPod = %v, %v; want the error %q", got, err, want)
				}
			case err != nil:
				t.Fatal(err)
			case got.Name != tc.want:
				t.Errorf("launcherPod = %s, want %s", got.Name, tc.want)
			}
		})
	}
}

// TestWorkerIndex reads v1's index from the replica-index label and
// v2beta1's from the pod's name: with runLauncherAsWorker the v2beta1 label
// is the index plus one.
func TestWorkerIndex(t *testing.T) {
	labelled := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "demo-worker-3",
		Labels: map[string]string{"replica-index": "4", "training.kubeflow.org/replica-index": "4"}}}
	unlabelled := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "demo-worker-3"}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other-worker-3"}}
	cases := []struct {
		api    API
		pod    *corev1.Pod
		want   int
		wantOK bool
	}{
		{APIv1, labelled, 4, true},
		{APIv2beta1, labelled, 3, true},
		{APIv1, unlabelled, 3, true},
		{APIv2beta1, unlabelled, 3, true},
		{APIv1, other, 0, false},
		{APIv2beta1, other, 0, false},
	}
	for _, tc := range cases {
		if got, ok := WorkerIndex(tc.api, "demo", tc.pod); got != tc.want || ok != tc.wantOK {
			t.Errorf("%s: WorkerIndex(%s %v) = %d, %v; want %d, %v", tc.api.Version, tc.pod.Name, tc.pod.Labels, got, ok, tc.want, tc.wantOK)
		}
	}
}
