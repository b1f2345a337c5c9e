package tolerant

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	mpischeme "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned/scheme"
)

var gvr = kubeflow.SchemeGroupVersion.WithResource("mpijobs")

func resource() Resource {
	return ResourceOf[kubeflow.MPIJob, kubeflow.MPIJobList](gvr, kubeflow.Kind, "", mpischeme.Codecs.UniversalDeserializer())
}

// job is an MPIJob as the API server would return it; slots is the value of
// spec.slotsPerWorker, of whatever JSON type.
func job(ns, name string, slots any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeflow.org/v1",
		"kind":       "MPIJob",
		"metadata": map[string]any{
			"namespace": ns, "name": name, "uid": ns + "-" + name,
		},
		"spec": map[string]any{"slotsPerWorker": slots},
	}}
}

// reports collects what a Reporter is told.
type reports struct {
	mu   sync.Mutex
	refs []corev1.ObjectReference
	errs []string
}

func (r *reports) report(ref *corev1.ObjectReference, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refs = append(r.refs, *ref)
	r.errs = append(r.errs, err.Error())
}

func (r *reports) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.refs)
}

func newClient(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr: "MPIJobList"}, objs...)
}

func names(t *testing.T, list runtime.Object) []string {
	t.Helper()
	jobs, ok := list.(*kubeflow.MPIJobList)
	if !ok {
		t.Fatalf("list is a %T, want *MPIJobList", list)
	}
	var out []string
	for _, j := range jobs.Items {
		out = append(out, fmt.Sprintf("%s/%s slots=%d", j.Namespace, j.Name, *j.Spec.SlotsPerWorker))
	}
	return out
}

func TestListSkipsWhatDoesNotDecode(t *testing.T) {
	client := newClient(job("a", "good", int64(2)), job("b", "poisoned", "many"), job("c", "also-good", int64(1)))
	var got reports
	skips := NewSkips()
	skips.SetReporter(got.report)
	lw := NewListWatch(client, resource(), skips).(cache.ListerWatcherWithContext)

	list, err := lw.ListWithContext(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if diff := cmp.Diff([]string{"a/good slots=2", "c/also-good slots=1"}, names(t, list)); diff != "" {
		t.Errorf("listed jobs (-want +got):\n%s", diff)
	}
	wantRef := []corev1.ObjectReference{{APIVersion: "kubeflow.org/v1", Kind: "MPIJob", Namespace: "b",
		Name: "poisoned", UID: "b-poisoned"}}
	if diff := cmp.Diff(wantRef, got.refs); diff != "" {
		t.Errorf("reported (-want +got):\n%s", diff)
	}
	if len(got.errs) != 1 || !strings.Contains(got.errs[0], "slotsPerWorker") {
		t.Errorf("report errors %q, want one that names slotsPerWorker", got.errs)
	}

	// The same version again is not news.
	if _, err := lw.ListWithContext(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatalf("second list: %v", err)
	}
	if got.len() != 1 {
		t.Errorf("a relist of the same version reported again: %d reports", got.len())
	}
}

func TestWatchEvents(t *testing.T) {
	good := job("a", "j", int64(2))
	good.SetResourceVersion("1")
	bad := job("a", "j", "many")
	bad.SetResourceVersion("2")
	fixed := job("a", "j", int64(3))
	fixed.SetResourceVersion("3")
	badAgain := job("a", "j", map[string]any{"x": 1})
	badAgain.SetResourceVersion("4")
	newBad := job("a", "k", "many")
	newBad.SetResourceVersion("5")

	cases := []struct {
		in       watch.Event
		want     string // "" when the event is dropped
		reported int    // reports so far
	}{
		{watch.Event{Type: watch.Added, Object: good}, "ADDED a/j rv=1 slots=2", 0},
		{watch.Event{Type: watch.Modified, Object: bad}, "DELETED a/j rv=2 slots=nil", 1},
		{watch.Event{Type: watch.Modified, Object: fixed}, "MODIFIED a/j rv=3 slots=3", 1},
		{watch.Event{Type: watch.Modified, Object: badAgain}, "DELETED a/j rv=4 slots=nil", 2},
		{watch.Event{Type: watch.Deleted, Object: badAgain}, "DELETED a/j rv=4 slots=nil", 2},
		{watch.Event{Type: watch.Added, Object: newBad}, "", 3},
		{watch.Event{Type: watch.Bookmark, Object: &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kubeflow.org/v1", "kind": "MPIJob",
			"metadata": map[string]any{"resourceVersion": "9", "annotations": map[string]any{
				metav1.InitialEventsAnnotationKey: "true"}},
		}}}, "BOOKMARK / rv=9 slots=nil initial-events-end", 3},
	}
	var got reports
	skips := NewSkips()
	skips.SetReporter(got.report)
	d := decoder{Resource: resource(), skips: skips}
	for i, tc := range cases {
		out, ok := d.event(tc.in)
		desc := ""
		if ok {
			desc = describe(t, out)
		}
		if desc != tc.want {
			t.Errorf("event %d (%s): got %q, want %q", i, tc.in.Type, desc, tc.want)
		}
		if got.len() != tc.reported {
			t.Errorf("event %d (%s): %d reports, want %d", i, tc.in.Type, got.len(), tc.reported)
		}
	}
}

func describe(t *testing.T, e watch.Event) string {
	t.Helper()
	j, ok := e.Object.(*kubeflow.MPIJob)
	if !ok {
		t.Fatalf("%s event of a %T, want *MPIJob", e.Type, e.Object)
	}
	slots := "nil"
	if j.Spec.SlotsPerWorker != nil {
		slots = fmt.Sprint(*j.Spec.SlotsPerWorker)
	}
	s := fmt.Sprintf("%s %s/%s rv=%s slots=%s", e.Type, j.Namespace, j.Name, j.ResourceVersion, slots)
	if j.Annotations[metav1.InitialEventsAnnotationKey] == "true" {
		s += " initial-events-end"
	}
	return s
}

// TestInformerKeepsTheOthers runs an informer over a list with an object
// that cannot be decoded: it syncs, holds the others, takes the object up
// once it is fixed and drops it again when it breaks, and the recorder gets
// one Warning event per broken version.
func TestInformerKeepsTheOthers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := newClient(job("a", "good", int64(2)), job("b", "poisoned", "many"))
	recorder := record.NewFakeRecorder(10)
	skips := NewSkips()
	skips.SetReporter(EventReporter(recorder, "mpijobs"))
	inf := NewInformer(client, resource(), skips, 0)
	go inf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	has := func(key string) bool {
		_, exists, _ := inf.GetStore().GetByKey(key)
		return exists
	}
	if !has("a/good") || has("b/poisoned") {
		t.Fatalf("cache holds %v, want a/good only", inf.GetStore().ListKeys())
	}
	expectEvent(t, recorder, "Warning Undecodable", "slotsPerWorker")

	jobs := client.Resource(gvr)
	fixed := job("b", "poisoned", int64(4))
	if _, err := jobs.Namespace("b").Update(ctx, fixed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the fixed job in the cache", func() bool { return has("b/poisoned") })

	if _, err := jobs.Namespace("a").Update(ctx, job("a", "good", true), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the broken job out of the cache", func() bool { return !has("a/good") })
	expectEvent(t, recorder, "Warning Undecodable", "slotsPerWorker")
	if !has("b/poisoned") {
		t.Error("the other job left the cache")
	}
}

func expectEvent(t *testing.T, recorder *record.FakeRecorder, prefix, field string) {
	t.Helper()
	select {
	case e := <-recorder.Events:
		if !strings.HasPrefix(e, prefix) || !strings.Contains(e, field) {
			t.Errorf("event %q, want %q naming %s", e, prefix, field)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("no event %q", prefix)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func TestSkipsForget(t *testing.T) {
	var got reports
	s := NewSkips()
	s.SetReporter(got.report)
	ref := &corev1.ObjectReference{UID: types.UID("u"), ResourceVersion: "1"}
	s.skip(ref, fmt.Errorf("bad"))
	s.skip(ref, fmt.Errorf("bad"))
	s.forget("u")
	s.skip(ref, fmt.Errorf("bad"))
	if got.len() != 2 {
		t.Errorf("%d reports, want 2: one, none for the same version, one after forget", got.len())
	}
}
