package elastic

import corev1 "k8s.io/api/core/v1"

// ReplacedByNone is the AnnotationReplacedBy value of a failed worker that
// the job has no replacement for: it has as many workers as it wants.
const ReplacedByNone = "none"

// Replacement pairs a failed worker with the worker that replaces it.
type Replacement struct {
	// Failed is the failed worker's pod.
	Failed *corev1.Pod
	// By is the name of the replacing worker, or ReplacedByNone.
	By string
}

// Replacements decides which newly created worker replaces each failed
// worker of an elastic job that is not being deleted and carries no
// AnnotationReplacedBy yet: created (the indices the plan creates) are
// handed out in order to the failed workers in index order, and those left
// over are replaced by none. The caller records each answer on the failed
// pod, so that each failure is reported once.
func Replacements(workers []Worker, created []int, workerName func(index int) string) []Replacement {
	var out []Replacement
	for _, w := range workers {
		if w.Pod.Status.Phase != corev1.PodFailed || w.Terminating() {
			continue
		}
		if _, done := w.Pod.Annotations[AnnotationReplacedBy]; done {
			continue
		}
		by := ReplacedByNone
		if len(created) > 0 {
			by, created = workerName(created[0]), created[1:]
		}
		out = append(out, Replacement{Failed: w.Pod, By: by})
	}
	return out
}
