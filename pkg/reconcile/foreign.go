package reconcile

import (
	"errors"
	"fmt"
)

// ErrResourceExists stops a sync that met an object with a child's name that
// the owner does not control. Retried with backoff, the sync proceeds once
// the object is gone. Every such error is a *ForeignError, which names the
// object: test for it with errors.Is.
var ErrResourceExists = errors.New("resource exists and is not managed by the MPIJob")

// ReasonResourceExists is the reason BlockedReason gives for a
// ForeignError, the upstream operator's event reason for it.
const ReasonResourceExists = "ErrResourceExists"

// ForeignError is an object in the way of one of an owner's children: it
// has the child's name and the owner does not control it.
type ForeignError struct {
	// Kind and Name are the object's.
	Kind, Name string
	// OwnerKind and OwnerName are those of the owner it is in the way of.
	OwnerKind, OwnerName string
}

// NewForeignError returns the error for the object of kind and name that is
// in the way of one of owner's children.
func NewForeignError(owner Owner, kind, name string) error {
	return &ForeignError{Kind: kind, Name: name, OwnerKind: owner.Kind, OwnerName: owner.Object.GetName()}
}

// Error names the object and its would-be owner, as in
// `ConfigMap "pi-config" already exists and is not managed by MPIJob pi`.
func (e *ForeignError) Error() string {
	return fmt.Sprintf("%s %q already exists and is not managed by %s %s", e.Kind, e.Name, e.OwnerKind, e.OwnerName)
}

// Is makes every ForeignError match ErrResourceExists.
func (e *ForeignError) Is(target error) bool { return target == ErrResourceExists }

// ForeignPods is the error of owner's pods whose names pods of others hold:
// a ForeignError for each name.
func ForeignPods(owner Owner, names []string) error {
	errs := make([]error, len(names))
	for i, n := range names {
		errs[i] = NewForeignError(owner, "Pod", n)
	}
	return errors.Join(errs...)
}
