package engine

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// TestRefreshLauncher: a running launcher is annotated with the hash of
// each new script, once per version of the pod; one that is not running,
// is being deleted or shows the hash is not. No refresh is waited for.
func TestRefreshLauncher(t *testing.T) {
	const key, script = "ns/j", "echo j-worker-0:1\n"
	hash := elastic.HostsHash(script)
	launcher := func(phase corev1.PodPhase, resourceVersion, hash string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "j-launcher", Namespace: "ns", UID: "launcher-uid", ResourceVersion: resourceVersion}}
		p.Status.Phase = phase
		if hash != "" {
			p.Annotations = map[string]string{elastic.AnnotationHostsHash: hash}
		}
		return p
	}
	deleting := launcher(corev1.PodRunning, "1", "")
	deleting.DeletionTimestamp = &metav1.Time{Time: testNow}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		// before, when set, is the version of the pod an earlier refresh
		// of the same script was sent for.
		before string
		want   bool
	}{
		{name: "running", pod: launcher(corev1.PodRunning, "1", "old"), want: true},
		{name: "running without a hash", pod: launcher(corev1.PodRunning, "1", ""), want: true},
		{name: "pending", pod: launcher(corev1.PodPending, "1", "old")},
		{name: "succeeded", pod: launcher(corev1.PodSucceeded, "1", "old")},
		{name: "being deleted", pod: deleting},
		{name: "shows the hash", pod: launcher(corev1.PodRunning, "1", hash)},
		{name: "sent to this version", pod: launcher(corev1.PodRunning, "1", "old"), before: "1"},
		{name: "sent to an older version", pod: launcher(corev1.PodRunning, "2", "old"), before: "1", want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			client := fake.NewClientset(tc.pod)
			expectations := reconcile.NewExpectations(testingclock.NewFakePassiveClock(testNow))
			e := &Engine{Pods: reconcile.PodWrites{Client: client, Expectations: expectations,
				Lister: corelisters.NewPodLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))}}
			if tc.before != "" {
				e.Launchers.last.Store(key, sentRefresh{uid: tc.pod.UID, resourceVersion: tc.before, hash: hash})
			}
			got, err := e.RefreshLauncher(ctx, key, tc.pod, script)
			if err != nil {
				t.Fatal(err)
			}
			patched := len(client.Actions()) > 0
			if patched != tc.want {
				t.Fatalf("patched = %v, want %v (requests %v)", patched, tc.want, client.Actions())
			}
			if !tc.want {
				if got != tc.pod {
					t.Error("the pod returned is not the one given")
				}
				return
			}
			if got.Annotations[elastic.AnnotationHostsHash] != hash {
				t.Errorf("the pod returned has hash %q, want %q", got.Annotations[elastic.AnnotationHostsHash], hash)
			}
			if expectations.Holds(key) {
				t.Error("the refresh is an expectation: the job's next sync waits for it")
			}
			// A sync on a cache that still shows the pod as it was sends
			// nothing again.
			client.ClearActions()
			if _, err := e.RefreshLauncher(ctx, key, tc.pod, script); err != nil {
				t.Fatal(err)
			}
			if len(client.Actions()) > 0 {
				t.Errorf("sent again to the same version of the pod: %v", client.Actions())
			}
		})
	}
}
