package elastic

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestSettled(t *testing.T) {
	running := func(i int) *corev1.Pod { return testPod(i, corev1.PodRunning) }
	cases := []struct {
		name     string
		replicas int
		pods     []*corev1.Pod
		listable func(Worker) bool
		want     bool
	}{
		{name: "every wanted worker runs", replicas: 2, pods: []*corev1.Pod{running(0), running(1)}, want: true},
		{name: "a finished worker left behind does not count", replicas: 2,
			pods: []*corev1.Pod{running(0), running(2), testPod(1, corev1.PodSucceeded, annotate(AnnotationReplacedBy, "job-worker-2"))}, want: true},
		{name: "zero of nothing", replicas: 0, want: true},
		{name: "workers to create", replicas: 3, pods: []*corev1.Pod{running(0), running(1)}},
		{name: "a worker not Running yet", replicas: 2, pods: []*corev1.Pod{running(0), testPod(1, corev1.PodPending)}},
		{name: "a worker to drain", replicas: 1, pods: []*corev1.Pod{running(0), running(1)}},
		{name: "a worker draining", replicas: 1, pods: []*corev1.Pod{running(0), testPod(1, corev1.PodRunning, drainingFor(time.Second))}},
		{name: "a drained worker to remove", replicas: 1, pods: []*corev1.Pod{running(0), testPod(1, corev1.PodRunning, drainingFor(time.Hour))}},
		{name: "a worker being deleted", replicas: 1, pods: []*corev1.Pod{running(0), testPod(1, corev1.PodRunning, terminating)}},
		{name: "a Running worker not listable yet", replicas: 2, pods: []*corev1.Pod{running(0), running(1)},
			listable: func(w Worker) bool { return w.Index == 0 }},
		{name: "every worker listable", replicas: 2, pods: []*corev1.Pod{running(0), running(1)},
			listable: func(Worker) bool { return true }, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := elasticSpec(tc.replicas, 20*time.Second)
			spec.Listable = tc.listable
			ws := workers(tc.pods...)
			if got := Settled(spec, ws, PlanWorkers(spec, ws, 0, noHolders, testNow)); got != tc.want {
				t.Errorf("Settled = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSettledWithAChangingPlan: a plan that still creates, drains or
// removes is never settled, whatever the workers look like (as when the
// caller drops a plan's writes until its cache shows its last ones).
func TestSettledWithAChangingPlan(t *testing.T) {
	spec := elasticSpec(1, 20*time.Second)
	ws := workers(testPod(0, corev1.PodRunning))
	p := testPod(5, corev1.PodRunning)
	for name, plan := range map[string]Plan{
		"create": {Create: []int{1}},
		"drain":  {Drain: []*corev1.Pod{p}},
		"remove": {Remove: []*corev1.Pod{p}},
	} {
		if Settled(spec, ws, plan) {
			t.Errorf("settled with a plan that has a %s", name)
		}
	}
	if !Settled(spec, ws, Plan{}) {
		t.Error("not settled with one Running worker of one and nothing to do")
	}
}

func TestSooner(t *testing.T) {
	cases := []struct{ a, b, want time.Duration }{
		{0, 0, 0},
		{0, 5, 5},
		{5, 0, 5},
		{-1, 5, 5},
		{5, -1, 5},
		{3, 5, 3},
		{5, 3, 3},
	}
	for _, tc := range cases {
		if got := Sooner(tc.a, tc.b); got != tc.want {
			t.Errorf("Sooner(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
