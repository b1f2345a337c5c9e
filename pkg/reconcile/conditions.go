package reconcile

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// The reasons of the job conditions that both operators set as the
// upstream operators did: Kueue, Kubeflow Pipelines and the SDKs read them.
const (
	ReasonCreated   = "MPIJobCreated"
	ReasonRunning   = "MPIJobRunning"
	ReasonSucceeded = "MPIJobSucceeded"
	ReasonFailed    = "MPIJobFailed"
	ReasonEvicted   = "MPIJobEvicted"
)

// Conditions reads and trims the condition lists of job statuses of one
// API version: C is its condition type, T the type of a condition's type.
// Both operators' job conditions follow Kubeflow's rules, with types and
// structs of their own APIs.
type Conditions[C any, T comparable] struct {
	Type   func(*C) T
	Status func(*C) corev1.ConditionStatus
	// Succeeded and Failed are the types of the conditions that end a job.
	Succeeded, Failed T
}

// Find returns the condition of type t in list, nil when there is none.
func (k Conditions[C, T]) Find(list []C, t T) *C {
	for i := range list {
		if k.Type(&list[i]) == t {
			return &list[i]
		}
	}
	return nil
}

// Has tells whether list holds a True condition of type t.
func (k Conditions[C, T]) Has(list []C, t T) bool {
	c := k.Find(list, t)
	return c != nil && k.Status(c) == corev1.ConditionTrue
}

// Finished tells whether list says the job Succeeded or Failed.
func (k Conditions[C, T]) Finished(list []C) bool {
	return k.Has(list, k.Succeeded) || k.Has(list, k.Failed)
}

// Remove drops every condition of type t from list.
func (k Conditions[C, T]) Remove(list []C, t T) []C {
	return slices.DeleteFunc(list, func(c C) bool { return k.Type(&c) == t })
}
