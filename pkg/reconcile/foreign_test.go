package reconcile

import (
	"errors"
	"fmt"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestForeignError(t *testing.T) {
	cases := []struct {
		name  string
		owner Owner
		kind  string
		obj   string
		want  string
	}{
		{
			name:  "an MPIJob's ConfigMap",
			owner: testOwner,
			kind:  "ConfigMap", obj: "pi-config",
			want: `ConfigMap "pi-config" already exists and is not managed by MPIJob pi`,
		},
		{
			name:  "the owner's kind is the caller's",
			owner: Owner{Kind: "TrainJob", Object: &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train"}}},
			kind:  "Pod", obj: "train-worker-0",
			want: `Pod "train-worker-0" already exists and is not managed by TrainJob train`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := NewForeignError(tc.owner, tc.kind, tc.obj)
			if err.Error() != tc.want {
				t.Errorf("Error() = %q, want %q", err, tc.want)
			}
			wrapped := errors.Join(errors.New("other"), fmt.Errorf("creating: %w", err))
			if !errors.Is(wrapped, ErrResourceExists) {
				t.Error("a wrapped ForeignError is not ErrResourceExists")
			}
			var foreign *ForeignError
			if !errors.As(wrapped, &foreign) {
				t.Fatal("errors.As finds no ForeignError")
			}
			want := ForeignError{Kind: tc.kind, Name: tc.obj, OwnerKind: tc.owner.Kind, OwnerName: tc.owner.Object.GetName()}
			if *foreign != want {
				t.Errorf("ForeignError %+v, want %+v", *foreign, want)
			}
		})
	}
	if errors.Is(errors.New("resource exists"), ErrResourceExists) {
		t.Error("a plain error is ErrResourceExists")
	}
}

func TestForeignPods(t *testing.T) {
	if err := ForeignPods(testOwner, nil); err != nil {
		t.Errorf("no names: %v, want nil", err)
	}
	err := ForeignPods(testOwner, []string{"pi-worker-0", "pi-worker-3"})
	want := `Pod "pi-worker-0" already exists and is not managed by MPIJob pi` + "\n" +
		`Pod "pi-worker-3" already exists and is not managed by MPIJob pi`
	if err == nil || err.Error() != want {
		t.Errorf("two names: %v, want %q", err, want)
	}
	if !errors.Is(err, ErrResourceExists) {
		t.Error("the error is not ErrResourceExists")
	}
}
