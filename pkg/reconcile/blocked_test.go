package reconcile

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestBlockedReason(t *testing.T) {
	cm := schema.GroupResource{Resource: "configmaps"}
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "pi-launcher",
		field.ErrorList{field.Invalid(field.NewPath("spec", "containers").Index(0).Child("volumeMounts").Index(1).Child("mountPath"), "/etc/mpi", "must be unique")})
	spec := &SpecError{Reason: "InvalidMPIJobSpec", Job: "ns/pi", Errs: field.ErrorList{field.Required(field.NewPath("spec", "mainContainer"), "")}}
	cases := []struct {
		name   string
		err    error
		reason string // "" for not blocked
	}{
		{"none", nil, ""},
		{"foreign object", NewForeignError(testOwner, "ConfigMap", "pi-config"), "ErrResourceExists"},
		{"foreign object, wrapped and joined", errors.Join(errors.New("other"), fmt.Errorf("x: %w", NewForeignError(testOwner, "Pod", "p"))), "ErrResourceExists"},
		{"invalid spec", spec, "InvalidMPIJobSpec"},
		{"invalid spec, wrapped", fmt.Errorf("x: %w", spec), "InvalidMPIJobSpec"},
		{"at the bound of workers, joined", errors.Join(nil, &BoundError{Job: "ns/pi", Pods: 5000, Max: 5000, HeldBack: 3}), "WorkersAtBound"},
		{"invalid", fmt.Errorf("creating pod: %w", invalid), "Invalid"},
		{"forbidden", apierrors.NewForbidden(cm, "pi-config", errors.New("exceeded quota")), "Forbidden"},
		{"too large", apierrors.NewRequestEntityTooLargeError("limit is 3145728"), "RequestEntityTooLarge"},
		{"bad request", apierrors.NewBadRequest("nope"), "BadRequest"},
		{"method not allowed", apierrors.NewMethodNotSupported(cm, "patch"), "MethodNotAllowed"},
		{"not acceptable", apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "get", cm, "pi-config", "", 0, false), "NotAcceptable"},
		{"unsupported media type", apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", cm, "pi-config", "", 0, false), "UnsupportedMediaType"},
		{"conflict", apierrors.NewConflict(cm, "pi-config", errors.New("stale")), ""},
		{"timeout", apierrors.NewTimeoutError("slow", 1), ""},
		{"throttled", apierrors.NewTooManyRequests("slow down", 1), ""},
		{"server error", apierrors.NewInternalError(errors.New("etcd")), ""},
		{"not found", apierrors.NewNotFound(cm, "pi-config"), ""},
		{"plain error", errors.New("connection refused"), ""},
	}
	for _, tc := range cases {
		reason, ok := BlockedReason(tc.err)
		if ok != (tc.reason != "") || reason != tc.reason {
			t.Errorf("%s: BlockedReason = %q, %v; want %q", tc.name, reason, ok, tc.reason)
		}
		if IsBlocked(tc.err) != ok {
			t.Errorf("%s: IsBlocked = %v, want %v", tc.name, !ok, ok)
		}
	}
}

func TestSpecError(t *testing.T) {
	err := &SpecError{Reason: "InvalidMPIJobSpec", Job: "ns/pi", Errs: field.ErrorList{
		field.NotSupported(field.NewPath("spec", "mainContainer"), "tpyo", []string{"mpi"}),
	}}
	want := `MPIJob ns/pi is invalid: spec.mainContainer: Unsupported value: "tpyo": supported values: "mpi"; ` +
		"its pods and files are left as they are until the spec is valid again"
	if err.Error() != want {
		t.Errorf("Error() = %q, want %q", err, want)
	}
	if reason := apierrors.ReasonForError(err); reason != metav1.StatusReasonUnknown {
		t.Errorf("the API server's reason for a SpecError is %q, want none", reason)
	}
}
