package reconcile

import (
	"context"
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

func TestControllerUID(t *testing.T) {
	owned := ownedPod("job-worker-0", "w0")
	notControlling := owned.DeepCopy()
	notControlling.OwnerReferences[0].Controller = nil
	cases := []struct {
		name string
		obj  any
		want []string
	}{
		{"controlled", owned, []string{"job-uid"}},
		{"controlled, metadata only", &metav1.PartialObjectMetadata{ObjectMeta: owned.ObjectMeta}, []string{"job-uid"}},
		{"owned, not controlled", notControlling, nil},
		{"not an object", "pod", nil},
	}
	for _, tc := range cases {
		got, err := ControllerUID(tc.obj)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: index values (-want +got):\n%s", tc.name, diff)
		}
	}
}

// TestStraysAreAdopted: of a cache of pods without the owner's labels, the
// live ones the owner controls are its strays; adopting one gives it its
// labels back, guarded by its resourceVersion, and the owner's pod writes
// wait until the cache shows it again.
func TestStraysAreAdopted(t *testing.T) {
	stray := ownedPod("job-worker-3", "w3")
	stray.ResourceVersion = "7"
	stray.Labels = map[string]string{"kept": "yes"}
	leaving := ownedPod("job-worker-4", "w4")
	leaving.DeletionTimestamp = &metav1.Time{}
	theirs := ownedPod("other-worker-0", "o0")
	theirs.OwnerReferences[0].UID = "other-uid"
	others := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{ByControllerUID: ControllerUID})
	for _, p := range []*corev1.Pod{stray, leaving, theirs} {
		if err := others.Add(&metav1.PartialObjectMetadata{ObjectMeta: p.ObjectMeta}); err != nil {
			t.Fatal(err)
		}
	}
	strays := Strays(others, "job-uid")
	if len(strays) != 1 || strays[0].GetName() != "job-worker-3" {
		t.Fatalf("strays %v, want job-worker-3 alone", strays)
	}

	w, client := podWritesFixture(t, []runtime.Object{stray})
	want := map[string]string{"role": "worker", "job": "job"}
	if err := w.Adopt(context.Background(), testPodOwner(), strays[0], want); err != nil {
		t.Fatal(err)
	}
	got, err := client.CoreV1().Pods("ns").Get(context.Background(), "job-worker-3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if wantAll := map[string]string{"role": "worker", "job": "job", "kept": "yes"}; !maps.Equal(got.Labels, wantAll) {
		t.Errorf("labels %v, want %v", got.Labels, wantAll)
	}
	if w.Expectations.Satisfied("ns/job") {
		t.Error("an adopted pod the cache does not show yet satisfies the expectations")
	}
}
