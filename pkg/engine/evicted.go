package engine

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// PodEvicted is the reason the kubelet gives a pod it evicted.
const PodEvicted = "Evicted"

// EvictedWorkers tells whether any of a job's workers was evicted, and the
// message with which a job without an elastic policy fails for it, as the
// upstream operator fails it.
func EvictedWorkers(workers []*corev1.Pod) (string, bool) {
	evicted := 0
	for _, p := range workers {
		if p.Status.Phase == corev1.PodFailed && p.Status.Reason == PodEvicted {
			evicted++
		}
	}
	return fmt.Sprintf("%d/%d workers are evicted", evicted, len(workers)), evicted > 0
}
