package elastic

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseWorkers(t *testing.T) {
	since := testNow.Add(-10 * time.Second)
	noIndex := testPod(0, corev1.PodRunning)
	noIndex.Name = "stranger"
	delete(noIndex.Labels, "replica-index")
	nameOnly := testPod(11, corev1.PodRunning)
	delete(nameOnly.Labels, "replica-index")
	labelOnly := testPod(4, corev1.PodRunning)
	labelOnly.Name = "renamed"
	pods := []*corev1.Pod{
		testPod(10, corev1.PodRunning),
		testPod(2, corev1.PodRunning, drainingFor(10*time.Second)),
		noIndex,
		testPod(1, corev1.PodPending, annotate(AnnotationDrainingSince, "not a time")),
		labelOnly,
		nameOnly,
	}
	type got struct {
		Name          string
		Index         int
		DrainingSince time.Time
	}
	var gotList []got
	for _, w := range ParseWorkers(pods, testIndex) {
		gotList = append(gotList, got{w.Pod.Name, w.Index, w.DrainingSince})
	}
	want := []got{
		{"job-worker-1", 1, time.Unix(0, 0)},
		{"job-worker-2", 2, since},
		{"renamed", 4, time.Time{}},
		{"job-worker-10", 10, time.Time{}},
		{"job-worker-11", 11, time.Time{}},
	}
	if diff := cmp.Diff(want, gotList); diff != "" {
		t.Errorf("ParseWorkers (-want +got):\n%s", diff)
	}
	if ws := ParseWorkers(nil, testIndex); len(ws) != 0 {
		t.Errorf("ParseWorkers(nil) = %v, want empty", ws)
	}
}

func TestWorkerStates(t *testing.T) {
	cases := []struct {
		name                                                 string
		pod                                                  *corev1.Pod
		draining                                             bool
		wantTerminating, wantFinished, wantRunning, wantLive bool
	}{
		{name: "pending", pod: testPod(0, corev1.PodPending), wantLive: true},
		{name: "running", pod: testPod(0, corev1.PodRunning), wantRunning: true, wantLive: true},
		{name: "failed", pod: testPod(0, corev1.PodFailed), wantFinished: true},
		{name: "succeeded", pod: testPod(0, corev1.PodSucceeded), wantFinished: true},
		{name: "unknown phase", pod: testPod(0, corev1.PodUnknown), wantLive: true},
		{name: "terminating", pod: testPod(0, corev1.PodRunning, terminating), wantTerminating: true, wantRunning: true},
		{name: "draining", pod: testPod(0, corev1.PodRunning), draining: true, wantRunning: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := Worker{Pod: tc.pod}
			if tc.draining {
				w.DrainingSince = testNow
			}
			got := []bool{w.Terminating(), w.Finished(), w.Running(), w.Live(), w.Draining()}
			want := []bool{tc.wantTerminating, tc.wantFinished, tc.wantRunning, tc.wantLive, tc.draining}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("terminating/finished/running/live/draining (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCountRunning(t *testing.T) {
	ws := workers(
		testPod(0, corev1.PodRunning), testPod(1, corev1.PodPending), testPod(2, corev1.PodFailed),
		testPod(3, corev1.PodRunning, terminating), testPod(4, corev1.PodRunning, drainingFor(time.Second)),
		testPod(5, corev1.PodRunning),
	)
	if got := CountRunning(ws); got != 2 {
		t.Errorf("CountRunning = %d, want 2 (workers 0 and 5)", got)
	}
	if got := CountRunning(nil); got != 0 {
		t.Errorf("CountRunning(nil) = %d", got)
	}
}

func TestDiscoverable(t *testing.T) {
	deleted := metav1.NewTime(testNow)
	cases := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"running", testPod(0, corev1.PodRunning), true},
		{"pending", testPod(0, corev1.PodPending), false},
		{"failed", testPod(0, corev1.PodFailed), false},
		{"succeeded", testPod(0, corev1.PodSucceeded), false},
		{"deleted", testPod(0, corev1.PodRunning, func(p *corev1.Pod) { p.DeletionTimestamp = &deleted }), false},
		{"draining", testPod(0, corev1.PodRunning, drainingFor(0)), false},
		{"draining since an unreadable time", testPod(0, corev1.PodRunning, annotate(AnnotationDrainingSince, "now")), false},
		{"other annotations", testPod(0, corev1.PodRunning, withCost(3)), true},
	}
	for _, tc := range cases {
		if got := Discoverable(tc.pod); got != tc.want {
			t.Errorf("%s: Discoverable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestDiscoverabilityChanged(t *testing.T) {
	worker := func(phase corev1.PodPhase, role string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"role": role}}, Status: corev1.PodStatus{Phase: phase}}
	}
	isWorker := func(p *corev1.Pod) bool { return p.Labels["role"] == "worker" }
	running, pending := worker(corev1.PodRunning, "worker"), worker(corev1.PodPending, "worker")
	launcher := worker(corev1.PodRunning, "launcher")
	draining := worker(corev1.PodRunning, "worker")
	draining.Annotations = map[string]string{AnnotationDrainingSince: "now"}
	for name, tc := range map[string]struct {
		old, new *corev1.Pod
		want     bool
	}{
		"turns Running":          {pending, running, true},
		"marked draining":        {running, draining, true},
		"stays Running":          {running, running, false},
		"new Running worker":     {nil, running, true},
		"new Pending worker":     {nil, pending, false},
		"Running worker gone":    {running, nil, true},
		"launcher turns Running": {worker(corev1.PodPending, "launcher"), launcher, false},
	} {
		if got := DiscoverabilityChanged(tc.old, tc.new, isWorker); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}
