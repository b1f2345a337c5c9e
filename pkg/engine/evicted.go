package engine

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// PodEvicted is the reason the kubelet gives a pod it evicted.
const PodEvicted = "Evicted"

// FixedJobEvicted tells whether a job without an elastic policy has an
// evicted worker, and the message with which it fails for it, as the
// upstream operator fails it. An elastic job replaces such a worker instead,
// so its workers are not looked at.
func FixedJobEvicted(elastic bool, workers []*corev1.Pod) (string, bool) {
	if elastic {
		return "", false
	}
	evicted := 0
	for _, p := range workers {
		if p.Status.Phase == corev1.PodFailed && p.Status.Reason == PodEvicted {
			evicted++
		}
	}
	return fmt.Sprintf("%d/%d workers are evicted", evicted, len(workers)), evicted > 0
}
