package elastic

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Worker is one worker pod of a job with its parsed index.
type Worker struct {
	// Pod is the worker's pod, as the caller's cache has it; never changed.
	Pod *corev1.Pod
	// Index is the worker's number, which its name ends with.
	Index int
	// DrainingSince is when the worker was chosen for removal, or zero.
	DrainingSince time.Time
}

// Terminating tells whether the worker's pod is being deleted.
func (w Worker) Terminating() bool { return w.Pod.DeletionTimestamp != nil }

// Draining tells whether the worker was chosen for removal.
func (w Worker) Draining() bool { return !w.DrainingSince.IsZero() }

// Finished tells whether the worker's pod has failed or succeeded.
func (w Worker) Finished() bool {
	return w.Pod.Status.Phase == corev1.PodFailed || w.Pod.Status.Phase == corev1.PodSucceeded
}

// Running tells whether the worker's pod is in the Running phase.
func (w Worker) Running() bool { return w.Pod.Status.Phase == corev1.PodRunning }

// Live tells whether the job counts the worker towards its replicas: it is
// neither terminating, nor draining, nor finished.
func (w Worker) Live() bool { return !w.Terminating() && !w.Draining() && !w.Finished() }

// ParseWorkers turns a job's worker pods into Workers sorted by index.
// indexOf tells a pod's index (operators label their workers differently);
// a pod it finds none for is dropped. An AnnotationDrainingSince that is not
// an RFC 3339 time reads as the start of 1970: long drained.
func ParseWorkers(pods []*corev1.Pod, indexOf func(*corev1.Pod) (int, bool)) []Worker {
	out := make([]Worker, 0, len(pods))
	for _, p := range pods {
		i, ok := indexOf(p)
		if !ok {
			continue
		}
		w := Worker{Pod: p, Index: i}
		if v, found := p.Annotations[AnnotationDrainingSince]; found {
			if t, err := time.Parse(time.RFC3339, v); err == nil {
				w.DrainingSince = t
			} else {
				w.DrainingSince = time.Unix(0, 0)
			}
		}
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b Worker) int { return cmp.Compare(a.Index, b.Index) })
	return out
}

// CountRunning is how many of the workers are live and Running.
func CountRunning(workers []Worker) int {
	n := 0
	for _, w := range workers {
		if w.Live() && w.Running() {
			n++
		}
	}
	return n
}

// Discoverable tells whether discover_hosts.sh may list a worker's pod as
// far as the pod itself goes: it is Running, not being deleted and not
// draining. An operator that watches pods can tell from it which pod events
// change the script.
func Discoverable(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		return false
	}
	_, draining := pod.Annotations[AnnotationDrainingSince]
	return !draining
}

// DiscoverabilityChanged tells whether a pod event changes what
// discover_hosts.sh may list: whether a worker (as isWorker tells) was
// Discoverable before it and is not after it, or the other way round.
// oldPod or newPod is nil when the pod is new or gone.
func DiscoverabilityChanged(oldPod, newPod *corev1.Pod, isWorker func(*corev1.Pod) bool) bool {
	listable := func(p *corev1.Pod) bool { return p != nil && isWorker(p) && Discoverable(p) }
	return listable(oldPod) != listable(newPod)
}

// compareForScaleIn orders workers from the first to remove to the last: not
// yet Running first, then the lowest pod-deletion-cost, then the highest
// index.
func compareForScaleIn(a, b Worker) int {
	if ar, br := a.Running(), b.Running(); ar != br {
		if br {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(deletionCost(a.Pod), deletionCost(b.Pod)); c != 0 {
		return c
	}
	return cmp.Compare(b.Index, a.Index)
}

// deletionCost reads the pod-deletion-cost annotation; absent or invalid
// means 0, as for a ReplicaSet.
func deletionCost(pod *corev1.Pod) int64 {
	v, ok := pod.Annotations[AnnotationDeletionCost]
	if !ok {
		return 0
	}
	cost, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0
	}
	return cost
}
