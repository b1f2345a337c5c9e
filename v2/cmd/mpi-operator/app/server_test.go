package app

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
)

func TestCheckServed(t *testing.T) {
	mpi := &metav1.APIResourceList{GroupVersion: "kubeflow.org/v2beta1",
		APIResources: []metav1.APIResource{{Name: "mpijobs"}, {Name: "mpijobs/status"}}}
	volcano := &metav1.APIResourceList{GroupVersion: "scheduling.volcano.sh/v1beta1",
		APIResources: []metav1.APIResource{{Name: "podgroups"}}}
	plugins := &metav1.APIResourceList{GroupVersion: "scheduling.x-k8s.io/v1alpha1",
		APIResources: []metav1.APIResource{{Name: "podgroups"}}}
	cases := []struct {
		name   string
		served []*metav1.APIResourceList
		gang   string
		want   string // "" means no error
	}{
		{"mpijobs", []*metav1.APIResourceList{mpi}, "", ""},
		{"no CRD", nil, "", "the v2beta1 MPIJob CRD is not installed"},
		{"volcano", []*metav1.APIResourceList{mpi, volcano}, "volcano", ""},
		{"volcano missing", []*metav1.APIResourceList{mpi, plugins}, "volcano", "--gang-scheduling=volcano needs volcano"},
		{"scheduler-plugins", []*metav1.APIResourceList{mpi, plugins}, "scheduler-plugins-scheduler", ""},
		{"scheduler-plugins missing", []*metav1.APIResourceList{mpi, volcano}, "scheduler-plugins-scheduler",
			"--gang-scheduling=scheduler-plugins-scheduler needs the scheduler-plugins coscheduling plugin"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := kubefake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery)
			d.Resources = tc.served
			err := checkServed(d, tc.gang)
			if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("checkServed() = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestNewClients(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	for gang, want := range map[string][2]bool{"": {false, false}, "volcano": {true, false}, "other": {false, true}} {
		cs, err := newClients(cfg, gang)
		if err != nil {
			t.Fatal(err)
		}
		if got := [2]bool{cs.volcano != nil, cs.schedPlugins != nil}; got != want || cs.mpi == nil || cs.Kube == nil {
			t.Errorf("gang %q: volcano, scheduler-plugins clients %v, want %v", gang, got, want)
		}
	}
}
