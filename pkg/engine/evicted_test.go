package engine

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestFixedJobEvicted(t *testing.T) {
	pod := func(phase corev1.PodPhase, reason string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: phase, Reason: reason}}
	}
	for _, tc := range []struct {
		name    string
		elastic bool
		workers []*corev1.Pod
		want    string
	}{
		{name: "none"},
		{name: "running and failed", workers: []*corev1.Pod{pod(corev1.PodRunning, ""), pod(corev1.PodFailed, "Error")}},
		{name: "evicted, not failed yet", workers: []*corev1.Pod{pod(corev1.PodRunning, PodEvicted)}},
		{name: "one of three evicted", workers: []*corev1.Pod{pod(corev1.PodRunning, ""), pod(corev1.PodFailed, PodEvicted), pod(corev1.PodPending, "")},
			want: "1/3 workers are evicted"},
		{name: "two of two evicted", workers: []*corev1.Pod{pod(corev1.PodFailed, PodEvicted), pod(corev1.PodFailed, PodEvicted)},
			want: "2/2 workers are evicted"},
		{name: "elastic job with evicted workers", elastic: true, workers: []*corev1.Pod{pod(corev1.PodFailed, PodEvicted)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, ok := FixedJobEvicted(tc.elastic, tc.workers)
			if ok != (tc.want != "") || ok && msg != tc.want {
				t.Errorf("FixedJobEvicted = %q, %v; want %q", msg, ok, tc.want)
			}
		})
	}
}
