package controller

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	core "k8s.io/client-go/testing"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
)

func managedBy(versions ...string) []metav1.ManagedFieldsEntry {
	var out []metav1.ManagedFieldsEntry
	for _, v := range versions {
		out = append(out, metav1.ManagedFieldsEntry{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: v, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}})
	}
	return out
}

func TestForeignAPIVersion(t *testing.T) {
	cases := []struct {
		name     string
		versions []string
		want     string
	}{
		{"no managed fields", nil, ""},
		{"v1 only", []string{"kubeflow.org/v1", "kubeflow.org/v1"}, ""},
		{"created through v2beta1", []string{"kubeflow.org/v2beta1"}, "kubeflow.org/v2beta1"},
		{"v1 spec, status by the v2beta1 operator", []string{"kubeflow.org/v1", "kubeflow.org/v2beta1"}, "kubeflow.org/v2beta1"},
		{"v1alpha2", []string{"kubeflow.org/v1alpha2"}, "kubeflow.org/v1alpha2"},
		{"other groups do not count", []string{"example.com/v2beta1", "kubeflow.org/v1"}, ""},
		{"malformed apiVersion", []string{"a/b/c"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := newTestJob("pi", 1)
			job.ManagedFields = managedBy(tc.versions...)
			got, found := foreignAPIVersion(job)
			if got != tc.want || found != (tc.want != "") {
				t.Errorf("foreignAPIVersion = %q, %v; want %q", got, found, tc.want)
			}

			// The informer keeps exactly what the check needs.
			trimmed, err := trimJob(job.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			var want []metav1.ManagedFieldsEntry
			if tc.want != "" {
				want = []metav1.ManagedFieldsEntry{{APIVersion: tc.want}}
			}
			if diff := cmp.Diff(want, trimmed.(*kubeflow.MPIJob).ManagedFields); diff != "" {
				t.Errorf("trimmed managed fields (-want +got):\n%s", diff)
			}
			if again, _ := foreignAPIVersion(trimmed.(*kubeflow.MPIJob)); again != tc.want {
				t.Errorf("after trimming: %q, want %q", again, tc.want)
			}
		})
	}
}

// TestForeignJobIsLeftAlone: a job written through v2beta1 gets no child,
// no status write and no pod; a Warning event says why.
func TestForeignJobIsLeftAlone(t *testing.T) {
	f := newFixture(t)
	// A Running worker that the files do not list yet: the sync of a v1
	// job would list it.
	job := oneOfTwoListed(f)
	job.ManagedFields = []metav1.ManagedFieldsEntry{{APIVersion: "kubeflow.org/v2beta1"}}
	f.sync(job)
	f.expectKubeWrites()
	f.expectMPIWrites()
	events := f.events()
	if len(events) != 1 || !strings.HasPrefix(events[0], "Warning "+eventUnsupportedAPIVersion+" MPIJob ns/pi was written through kubeflow.org/v2beta1") {
		t.Errorf("events %q", events)
	}
}

// TestStatusWriteCarriesNoManagedFields: what the cache keeps of the
// managed fields never reaches a request.
func TestStatusWriteCarriesNoManagedFields(t *testing.T) {
	f := newFixture(t)
	job := newTestJob("pi", 1)
	job.ManagedFields = []metav1.ManagedFieldsEntry{{APIVersion: "kubeflow.org/v1"}}
	f.jobs = append(f.jobs, job)
	f.sync(job)
	for _, a := range f.mpiClient.Actions() {
		if u, ok := a.(core.UpdateAction); ok {
			if mf := u.GetObject().(metav1.Object).GetManagedFields(); mf != nil {
				t.Errorf("%s sent managed fields %v", a.GetVerb(), mf)
			}
		}
	}
}
