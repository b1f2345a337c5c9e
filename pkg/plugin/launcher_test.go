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
