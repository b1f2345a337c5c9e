package reconcile

import (
	"context"
	"errors"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

// podWritesFixture is a PodWrites on a fake clientset, whose cache holds
// cached.
func podWritesFixture(t *testing.T, objs []runtime.Object, cached ...*corev1.Pod) (*PodWrites, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(objs...)
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, p := range cached {
		if err := indexer.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	return &PodWrites{
		Client:       client,
		Lister:       corelisters.NewPodLister(indexer),
		Expectations: NewExpectations(clocktesting.NewFakeClock(testNow)),
	}, client
}

func testPodOwner() Owner {
	return Owner{Kind: "MPIJob", Object: &metav1.ObjectMeta{Namespace: "ns", Name: "job", UID: "job-uid"}}
}

func ownedPod(name string, uid types.UID) *corev1.Pod {
	yes := true
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid,
		OwnerReferences: []metav1.OwnerReference{{Kind: "MPIJob", Name: "job", UID: "job-uid", Controller: &yes}}}}
}

func TestPodWritesCreate(t *testing.T) {
	foreign := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job-worker-1", UID: "other"}}
	w, _ := podWritesFixture(t, []runtime.Object{foreign})
	owner := testPodOwner()

	if _, err := w.Create(context.Background(), owner, ownedPod("job-worker-0", "")); err != nil {
		t.Fatal(err)
	}
	if w.Expectations.Satisfied("ns/job") {
		t.Error("a created pod the cache does not show yet satisfies the expectations")
	}
	w.Expectations.ObserveCreate("ns/job", "job-worker-0")

	_, err := w.Create(context.Background(), owner, ownedPod("job-worker-1", ""))
	var fe *ForeignError
	if !errors.As(err, &fe) || fe.Name != "job-worker-1" {
		t.Errorf("creating over a foreign pod: %v, want a ForeignError naming it", err)
	}
	if !w.Expectations.Satisfied("ns/job") {
		t.Error("a failed create left an expectation")
	}
}

// TestPodWritesCreateAdoptsStrippedPod: a pod of the owner's that lost its
// labels is out of the pod informer's sight; the create that finds it gives
// the labels back, and the sync waits to see it as it waits for a creation.
func TestPodWritesCreateAdoptsStrippedPod(t *testing.T) {
	stripped := ownedPod("job-worker-0", "w0")
	stripped.Labels = map[string]string{"kept": "yes"}
	w, client := podWritesFixture(t, []runtime.Object{stripped})
	want := ownedPod("job-worker-0", "")
	want.Labels = map[string]string{"training.kubeflow.org/job-name": "job", "training.kubeflow.org/job-role": "worker"}

	got, err := w.Create(context.Background(), testPodOwner(), want)
	if err != nil {
		t.Fatal(err)
	}
	live, err := client.CoreV1().Pods("ns").Get(context.Background(), "job-worker-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{"kept": "yes", "training.kubeflow.org/job-name": "job", "training.kubeflow.org/job-role": "worker"}
	if !maps.Equal(live.Labels, wantLabels) || !maps.Equal(got.Labels, wantLabels) {
		t.Errorf("labels %v on the server, %v returned; want %v", live.Labels, got.Labels, wantLabels)
	}
	if w.Expectations.Satisfied("ns/job") {
		t.Error("an adopted pod the cache does not show yet satisfies the expectations")
	}

	// One that has its labels is a pod the cache has yet to show: the
	// create's error, for a retry.
	w.Expectations.ObserveCreate("ns/job", "job-worker-0")
	if _, err := w.Create(context.Background(), testPodOwner(), want); !apierrors.IsAlreadyExists(err) {
		t.Errorf("creating over an own labelled pod: %v, want AlreadyExists", err)
	}
	if !w.Expectations.Satisfied("ns/job") {
		t.Error("a failed create left an expectation")
	}
}

func TestPodWritesAnnotate(t *testing.T) {
	pod := ownedPod("job-worker-0", "uid-0")
	w, _ := podWritesFixture(t, []runtime.Object{pod})
	owner := testPodOwner()

	patched, err := w.Annotate(context.Background(), owner, pod, "a", "b")
	if err != nil || patched == nil || patched.Annotations["a"] != "b" {
		t.Fatalf("Annotate: %v, %v", patched, err)
	}
	if w.Expectations.Satisfied("ns/job") {
		t.Error("a patch the cache does not show yet satisfies the expectations")
	}

	gone := ownedPod("job-worker-9", "uid-9")
	if patched, err := w.Annotate(context.Background(), owner, gone, "a", "b"); patched != nil || err != nil {
		t.Errorf("annotating a pod that is gone: %v, %v; want nothing", patched, err)
	}
}

func TestPodWritesAnnotateUntracked(t *testing.T) {
	pod := ownedPod("job-launcher", "uid-l")
	w, _ := podWritesFixture(t, []runtime.Object{pod})
	patched, err := w.AnnotateUntracked(context.Background(), pod, "a", "b")
	if err != nil || patched == nil || patched.Annotations["a"] != "b" {
		t.Fatalf("AnnotateUntracked: %v, %v", patched, err)
	}
	if !w.Expectations.Satisfied("ns/job") || w.Expectations.Changing("ns/job") {
		t.Error("an untracked patch left an expectation")
	}
	if patched, err := w.AnnotateUntracked(context.Background(), ownedPod("job-worker-9", "uid-9"), "a", "b"); patched != nil || err != nil {
		t.Errorf("annotating a pod that is gone: %v, %v; want nothing", patched, err)
	}
}

// A patch that the cache shows already (or that changed nothing) settles
// its expectation at once; a pod of the same name with another UID does
// not.
func TestPodWritesAnnotateSeenAlready(t *testing.T) {
	pod := ownedPod("job-worker-0", "uid-0")
	shown := pod.DeepCopy()
	shown.Annotations = map[string]string{"a": "b"}
	w, _ := podWritesFixture(t, []runtime.Object{pod}, shown)
	if _, err := w.Annotate(context.Background(), testPodOwner(), pod, "a", "b"); err != nil {
		t.Fatal(err)
	}
	if !w.Expectations.Satisfied("ns/job") {
		t.Error("a patch the cache shows already is still expected")
	}

	newer := shown.DeepCopy()
	newer.UID = "uid-new"
	w, _ = podWritesFixture(t, []runtime.Object{pod}, newer)
	if _, err := w.Annotate(context.Background(), testPodOwner(), pod, "a", "b"); err != nil {
		t.Fatal(err)
	}
	if w.Expectations.Satisfied("ns/job") {
		t.Error("a newer pod of the name settled the patch of the old one")
	}
}

func TestPodWritesDelete(t *testing.T) {
	pod := ownedPod("job-worker-0", "uid-0")
	w, client := podWritesFixture(t, []runtime.Object{pod})
	if err := w.Delete(context.Background(), testPodOwner(), pod); err != nil {
		t.Fatal(err)
	}
	if w.Expectations.Satisfied("ns/job") {
		t.Error("a deletion the cache does not show yet satisfies the expectations")
	}
	w.Expectations.ObserveGone("ns/job", "uid-0")

	// Gone already, or a newer pod has the name: no error, nothing expected.
	for _, refused := range []error{
		apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "job-worker-0"),
		apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "job-worker-0", errors.New("uid precondition")),
	} {
		client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, refused })
		if err := w.Delete(context.Background(), testPodOwner(), pod); err != nil {
			t.Errorf("%v: %v", refused, err)
		}
		if !w.Expectations.Satisfied("ns/job") {
			t.Errorf("%v left an expectation", refused)
		}
	}
	client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("boom")
	})
	if err := w.Delete(context.Background(), testPodOwner(), pod); err == nil {
		t.Error("a failed deletion is no error")
	}
}

func TestRestartPolicyOf(t *testing.T) {
	type upstream string
	for policy, want := range map[upstream]corev1.RestartPolicy{
		"Always":    corev1.RestartPolicyAlways,
		"OnFailure": corev1.RestartPolicyOnFailure,
		"Never":     corev1.RestartPolicyNever,
		"ExitCode":  corev1.RestartPolicyNever,
		"":          corev1.RestartPolicyNever,
	} {
		if got := RestartPolicyOf(policy); got != want {
			t.Errorf("RestartPolicyOf(%q) = %q, want %q", policy, got, want)
		}
	}
}

func TestCountPhases(t *testing.T) {
	pod := func(phase corev1.PodPhase, deleting bool) *corev1.Pod {
		p := &corev1.Pod{Status: corev1.PodStatus{Phase: phase}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	pods := []*corev1.Pod{
		pod(corev1.PodRunning, false), pod(corev1.PodRunning, false), pod(corev1.PodRunning, true),
		pod(corev1.PodSucceeded, false), pod(corev1.PodSucceeded, true),
		pod(corev1.PodFailed, true),
		pod(corev1.PodPending, false), pod(corev1.PodUnknown, false),
	}
	active, succeeded, failed := CountPhases(pods)
	if active != 2 || succeeded != 2 || failed != 1 {
		t.Errorf("CountPhases: active %d, succeeded %d, failed %d; want 2, 2, 1", active, succeeded, failed)
	}
}
