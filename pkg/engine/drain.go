package engine

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
)

// Draining counts from the write. A victim of a scale-in is deleted
// elastic.Spec.DrainPeriod after its drain mark (elastic's
// AnnotationDrainingSince), so the mark must not come before the launcher
// can know the victim is gone: the operators write the files first, then
// (v1) tell the launcher, and only then mark the victims that the files as
// written no longer list. A write that fails, or is refused, marks nothing
// and so starts no drain; the plan of the next sync picks the victims again
// and excludes them from the files again. A restart between the write and
// the marks loses nothing either: the next leader's marks come after the
// write it finds.

// Unlisted returns the victims that script, the discover_hosts.sh the API
// server holds after the caller's write, does not list: those whose drain
// may start now. A victim still listed (a write held back) waits for a
// later sync.
func Unlisted(victims []*corev1.Pod, script string) []*corev1.Pod {
	if len(victims) == 0 {
		return nil
	}
	listed := elastic.ListedPods(script)
	var out []*corev1.Pod
	for _, p := range victims {
		if !listed[p.Name] {
			out = append(out, p)
		}
	}
	return out
}
