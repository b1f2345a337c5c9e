package controller

import (
	"errors"
	"fmt"

	common "github.com/kubeflow/common/pkg/apis/common/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// conditionBlocked is True while the job cannot make progress because the
// API server refuses a write it needs for a reason that retrying alone does
// not cure: the object is invalid, too large or forbidden, or an object
// that is not the job's holds a child's name. Its reason says which, and its
// message carries the API server's words. It goes once a sync completes.
const conditionBlocked common.JobConditionType = "Blocked"

// blockedReason tells whether err is one that blocks the job, and the
// condition's reason for it: ErrResourceExists for an object in the way,
// otherwise the API server's own reason (Invalid, Forbidden,
// RequestEntityTooLarge, ...). Conflicts, timeouts, throttling and server
// errors pass with a retry, and are not.
func blockedReason(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	var foreign *foreignError
	if errors.As(err, &foreign) {
		return eventErrResourceExists, true
	}
	var spec *specError
	if errors.As(err, &spec) {
		return reasonInvalidSpec, true
	}
	switch reason := apierrors.ReasonForError(err); reason {
	case metav1.StatusReasonInvalid, metav1.StatusReasonForbidden, metav1.StatusReasonBadRequest,
		metav1.StatusReasonRequestEntityTooLarge, metav1.StatusReasonMethodNotAllowed,
		metav1.StatusReasonNotAcceptable, metav1.StatusReasonUnsupportedMediaType:
		return string(reason), true
	}
	return "", false
}

// updateBlocked sets or clears the Blocked condition from the outcome of a
// sync: set for an error that blocks the job, cleared once a sync went
// through, and left as it was after an error that a retry may cure.
func updateBlocked(status *common.JobStatus, err error, now metav1.Time) {
	if reason, ok := blockedReason(err); ok {
		setCondition(status, conditionBlocked, reason, err.Error(), now)
		return
	}
	if err == nil {
		removeCondition(status, conditionBlocked)
	}
}

func isBlocked(err error) bool {
	_, ok := blockedReason(err)
	return ok
}

// specError holds a started job whose spec is not valid (see checkSpec).
// Only an edit of the job cures it, and the edit's event brings the job
// back: it is not retried.
type specError struct {
	job  string
	errs field.ErrorList
}

func (e *specError) Error() string {
	return fmt.Sprintf("MPIJob %s is invalid: %v; its pods and files are left as they are until the spec is valid again",
		e.job, e.errs.ToAggregate())
}
