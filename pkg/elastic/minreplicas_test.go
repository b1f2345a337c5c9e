package elastic

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestTrackMinReplicas(t *testing.T) {
	const timeout = 60 * time.Second
	two := workers(testPod(0, corev1.PodRunning), testPod(1, corev1.PodRunning))
	// Worker 1 failed, worker 2 is pending and worker 3 drains: one runs.
	one := workers(testPod(0, corev1.PodRunning), testPod(1, corev1.PodFailed),
		testPod(2, corev1.PodPending), testPod(3, corev1.PodRunning, drainingFor(time.Second)))
	earlier := testNow.Add(-20 * time.Second)
	cases := []struct {
		name     string
		started  bool
		workers  []Worker
		recorded time.Time
		want     MinReplicasClock
		expired  bool
	}{
		{name: "not started: no clock, whatever runs", workers: one, recorded: earlier},
		{name: "enough running", started: true, workers: two, want: MinReplicasClock{Running: 2}},
		{name: "enough running stops a recorded clock", started: true, workers: two, recorded: earlier,
			want: MinReplicasClock{Running: 2}},
		{name: "below: the clock starts now", started: true, workers: one,
			want: MinReplicasClock{Since: testNow, Running: 1, Left: timeout}},
		{name: "below: a recorded clock goes on", started: true, workers: one, recorded: earlier,
			want: MinReplicasClock{Since: earlier, Running: 1, Left: 40 * time.Second}},
		{name: "below for exactly the timeout: expired", started: true, workers: one, recorded: testNow.Add(-timeout),
			want: MinReplicasClock{Since: testNow.Add(-timeout), Running: 1}, expired: true},
		{name: "below for longer: expired, never negative", started: true, workers: nil, recorded: testNow.Add(-time.Hour),
			want: MinReplicasClock{Since: testNow.Add(-time.Hour)}, expired: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := TrackMinReplicas(2, timeout, tc.started, tc.workers, tc.recorded, testNow)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("TrackMinReplicas (-want +got):\n%s", diff)
			}
			if got.Expired() != tc.expired {
				t.Errorf("Expired = %v, want %v", got.Expired(), tc.expired)
			}
		})
	}
}

func TestTrackMinReplicasZeroTimeout(t *testing.T) {
	got := TrackMinReplicas(1, 0, true, nil, time.Time{}, testNow)
	if !got.Expired() || !got.Since.Equal(testNow) {
		t.Errorf("TrackMinReplicas with no timeout = %+v, want expired at once", got)
	}
}
