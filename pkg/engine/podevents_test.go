package engine

import (
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/metrics"
)

// TestPodEventsTimeDiscovery: a worker turning Running is remembered, and
// its job queued urgently; the files that list it then observe the
// discovery histogram with the time since, once. A launcher turning
// Running is not remembered, and a worker that goes is forgotten.
func TestPodEventsTimeDiscovery(t *testing.T) {
	const key = "ns/job"
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	b := NewBase(fake.NewClientset(), nil, nil, nil, clk)
	defer b.Queue.ShutDown()
	h := b.PodEvents(func(p *corev1.Pod) (string, bool) { return p.Namespace + "/job", true },
		func(p *corev1.Pod) bool { return p.Labels["role"] == "worker" })
	pod := func(name, role string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
			Labels: map[string]string{"role": role}}, Status: corev1.PodStatus{Phase: phase}}
	}
	samples := func() (uint64, float64) {
		var m dto.Metric
		if err := metrics.DiscoveryLatency.Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
	}

	h.UpdateFunc(pod("job-launcher", "launcher", corev1.PodPending), pod("job-launcher", "launcher", corev1.PodRunning))
	if b.Engine.Running.Holds(key) {
		t.Error("a launcher turning Running is remembered")
	}
	worker := pod("job-worker-0", "worker", corev1.PodRunning)
	h.UpdateFunc(pod("job-worker-0", "worker", corev1.PodPending), worker)
	if !b.Engine.Running.Holds(key) {
		t.Fatal("a worker turning Running is not remembered")
	}
	if got, priority, _ := b.Queue.GetWithPriority(); got != key || priority == 0 {
		t.Errorf("queued %q, priority %d; want %q, urgent", got, priority, key)
	}

	count, sum := samples()
	clk.Step(250 * time.Millisecond)
	ws := []elastic.Worker{{Pod: worker}}
	b.Engine.observeDiscovery(key, ws, []string{"job-worker-0"})
	b.Engine.observeDiscovery(key, ws, []string{"job-worker-0"})
	if c, s := samples(); c != count+1 || s-sum != 0.25 {
		t.Errorf("histogram: %d more samples, %g more seconds; want 1, 0.25", c-count, s-sum)
	}
	if b.Engine.Running.Holds(key) {
		t.Error("a listed worker is still remembered")
	}

	h.UpdateFunc(pod("job-worker-1", "worker", corev1.PodPending), pod("job-worker-1", "worker", corev1.PodRunning))
	h.DeleteFunc(pod("job-worker-1", "worker", corev1.PodRunning))
	if b.Engine.Running.Holds(key) {
		t.Error("a worker that went is still remembered")
	}
}

// TestOtherPodEvents: a pod that takes or frees the name of an existing
// job's pod enqueues that job; any other pod, nothing.
func TestOtherPodEvents(t *testing.T) {
	b := NewBase(fake.NewClientset(), nil, nil, nil, testingclock.NewFakeClock(time.Unix(1000, 0)))
	defer b.Queue.ShutDown()
	jobOfName := func(pod string) (string, bool) { return strings.CutSuffix(pod, "-worker-0") }
	exists := func(namespace, name string) bool { return namespace == "ns" && name == "job" }
	h := b.OtherPodEvents(jobOfName, exists)
	meta := func(ns, name string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	h.AddFunc(meta("ns", "web-1"))
	h.AddFunc(meta("ns", "other-worker-0"))
	h.AddFunc(meta("elsewhere", "job-worker-0"))
	if n := b.Queue.Len(); n != 0 {
		t.Fatalf("pods of no existing job queued %d keys", n)
	}
	h.DeleteFunc(cache.DeletedFinalStateUnknown{Key: "ns/job-worker-0", Obj: meta("ns", "job-worker-0")})
	if got, _ := b.Queue.Get(); got != "ns/job" {
		t.Errorf("queued %q, want ns/job", got)
	}
}
