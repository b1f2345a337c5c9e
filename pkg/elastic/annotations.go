package elastic

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
)

// Annotations the elastic machinery reads and writes. Running jobs and the
// operators that share them depend on these keys: changing one breaks
// in-place upgrades.
const (
	// AnnotationDrainingSince marks a worker chosen for removal: it has left
	// discover_hosts.sh and is deleted once the drain period has passed.
	AnnotationDrainingSince = "mpi-operator.kubeflow.org/draining-since"
	// AnnotationNextWorkerIndex on the ConfigMap of an elastic job is the
	// lowest worker index the job has never used.
	AnnotationNextWorkerIndex = "mpi-operator.kubeflow.org/next-worker-index"
	// AnnotationBelowMinSince on the ConfigMap of an elastic job is when its
	// running workers fell below minReplicas.
	AnnotationBelowMinSince = "mpi-operator.kubeflow.org/below-min-replicas-since"
	// AnnotationReplacedBy on a failed worker of an elastic job names the
	// worker that replaced it, or is ReplacedByNone.
	AnnotationReplacedBy = "mpi-operator.kubeflow.org/replaced-by"
	// AnnotationHostsHash on the launcher changes with discover_hosts.sh, so
	// that the kubelet refreshes the launcher's ConfigMap volume at once.
	AnnotationHostsHash = "mpi-operator.kubeflow.org/hosts-hash"
	// AnnotationDeletionCost ranks workers for scale-in as it ranks the pods
	// of a ReplicaSet: lower cost goes first.
	AnnotationDeletionCost = "controller.kubernetes.io/pod-deletion-cost"
)

// State is what an elastic job keeps on its ConfigMap besides the files. It
// changes only together with the hosts, so it costs no request of its own,
// and it outlives a restart of the operator.
type State struct {
	// NextIndex is the lowest worker index the job has never used; 0 for
	// none recorded.
	NextIndex int
	// BelowMinSince is when the job's running workers fell below
	// minReplicas; zero while they are not below.
	BelowMinSince time.Time
}

// StateAnnotations returns the annotation keys that State owns: a writer
// sets those Annotations returns and removes the others.
func StateAnnotations() []string {
	return []string{AnnotationNextWorkerIndex, AnnotationBelowMinSince}
}

// Annotations returns the state as annotations; nil when nothing is set.
func (s State) Annotations() map[string]string {
	a := map[string]string{}
	if s.NextIndex > 0 {
		a[AnnotationNextWorkerIndex] = strconv.Itoa(s.NextIndex)
	}
	if !s.BelowMinSince.IsZero() {
		a[AnnotationBelowMinSince] = s.BelowMinSince.UTC().Format(time.RFC3339Nano)
	}
	if len(a) == 0 {
		return nil
	}
	return a
}

// ParseState reads the state back from annotations; what is missing or
// malformed reads as unset.
func ParseState(annotations map[string]string) State {
	var s State
	s.NextIndex, _ = ParseIndex(annotations[AnnotationNextWorkerIndex])
	if t, err := time.Parse(time.RFC3339, annotations[AnnotationBelowMinSince]); err == nil {
		s.BelowMinSince = t
	}
	return s
}

// ParseIndex accepts a worker index only in the form the operator writes
// it: a decimal number without sign or leading zeros.
func ParseIndex(s string) (int, bool) {
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 || strconv.Itoa(i) != s {
		return 0, false
	}
	return i, true
}

// HostsHash identifies a discover_hosts.sh content in a short string, the
// value of AnnotationHostsHash.
func HostsHash(script string) string {
	sum := sha256.Sum256([]byte(script))
	return hex.EncodeToString(sum[:8])
}
