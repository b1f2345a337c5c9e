package reconcile

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// BlockedReason tells whether err blocks the job until something other
// than time changes, and the reason for the job's condition that says so:
// ReasonResourceExists for an object in the way (a ForeignError), a
// SpecError's Reason, otherwise the API server's own reason for refusing a
// write for good (Invalid, Forbidden, BadRequest, RequestEntityTooLarge,
// MethodNotAllowed, NotAcceptable, UnsupportedMediaType). Conflicts,
// timeouts, throttling and server errors pass with a retry, and do not
// block. Wrapped and joined errors are searched.
func BlockedReason(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	var foreign *ForeignError
	if errors.As(err, &foreign) {
		return ReasonResourceExists, true
	}
	var spec *SpecError
	if errors.As(err, &spec) {
		return spec.Reason, true
	}
	var bound *BoundError
	if errors.As(err, &bound) {
		return ReasonAtBound, true
	}
	switch reason := apierrors.ReasonForError(err); reason {
	case metav1.StatusReasonInvalid, metav1.StatusReasonForbidden, metav1.StatusReasonBadRequest,
		metav1.StatusReasonRequestEntityTooLarge, metav1.StatusReasonMethodNotAllowed,
		metav1.StatusReasonNotAcceptable, metav1.StatusReasonUnsupportedMediaType:
		return string(reason), true
	}
	return "", false
}

// IsBlocked tells whether err blocks the job (see BlockedReason).
func IsBlocked(err error) bool {
	_, ok := BlockedReason(err)
	return ok
}

// SpecError holds a started job whose spec is not valid. Only an edit of
// the job cures it, and the edit's event brings the job back: it is not
// retried.
type SpecError struct {
	// Reason is the reason of the job's condition, such as
	// "InvalidMPIJobSpec".
	Reason string
	// Job names the job, as "namespace/name".
	Job string
	// Errs are the spec's faults.
	Errs field.ErrorList
}

// Error names the job and its faults, and says that the job is held.
func (e *SpecError) Error() string {
	return fmt.Sprintf("MPIJob %s is invalid: %v; its pods and files are left as they are until the spec is valid again",
		e.Job, e.Errs.ToAggregate())
}

// ReasonAtBound is the reason of the Blocked condition of a job that has
// as many workers as it may have at once.
const ReasonAtBound = "WorkersAtBound"

// BoundError holds back some of a job's creations: it has Pods workers that
// its files and Role name (listed or draining), Max at the most. Workers
// still drain and go meanwhile, and their deletions bring the job back.
type BoundError struct {
	// Job names the job, as "namespace/name".
	Job                 string
	Pods, Max, HeldBack int
}

func (e *BoundError) Error() string {
	return fmt.Sprintf("MPIJob %s has %d workers that are listed or draining, the most it may have at once (%d): "+
		"%d more are created as draining workers go", e.Job, e.Pods, e.Max, e.HeldBack)
}
