package operator

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestBuildRestConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, server string) string {
		p := filepath.Join(dir, name)
		cfg := `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: ` + server + `
users:
- name: u
  user:
    token: secret
contexts:
- name: ctx
  context:
    cluster: c
    user: u
current-context: ctx
`
		if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := write("first", "https://first.example:6443")
	second := write("second", "https://second.example:6443")

	cases := []struct {
		name, kubeconfig, master, wantHost string
	}{
		{name: "kubeconfig", kubeconfig: first, wantHost: "https://first.example:6443"},
		{name: "master overrides the kubeconfig", kubeconfig: first, master: "https://master.example", wantHost: "https://master.example"},
		{name: "a list of kubeconfigs, the first wins", kubeconfig: first + string(filepath.ListSeparator) + second, wantHost: "https://first.example:6443"},
		{name: "master only", master: "http://127.0.0.1:8080", wantHost: "http://127.0.0.1:8080"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := BuildRestConfig(tc.kubeconfig, tc.master, 7.5, 33, "mpi-operator", "KUBECONFIG")
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.wantHost {
				t.Errorf("Host = %q, want %q", cfg.Host, tc.wantHost)
			}
			if cfg.QPS != 7.5 || cfg.Burst != 33 {
				t.Errorf("QPS, Burst = %v, %v; want 7.5, 33", cfg.QPS, cfg.Burst)
			}
			if cfg.UserAgent != "mpi-operator" {
				t.Errorf("UserAgent = %q, want mpi-operator", cfg.UserAgent)
			}
		})
	}

	if _, err := BuildRestConfig(filepath.Join(dir, "missing"), "", 7.5, 33, "mpi-operator", "KUBECONFIG"); err == nil {
		t.Error("a missing kubeconfig was accepted")
	}
}

func TestBuildRestConfigOutOfCluster(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	_, err := BuildRestConfig("", "", 5, 10, "mpi-operator", "MY_KUBECONFIG")
	if err == nil {
		t.Fatal("BuildRestConfig() out of a cluster, with no kubeconfig or master, succeeded")
	}
	for _, w := range []string{"no --kubeConfig, --master or $MY_KUBECONFIG given", "in-cluster configuration is not available"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("BuildRestConfig() = %q, want it to contain %q", err, w)
		}
	}
}

func TestServedResources(t *testing.T) {
	d := kubefake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery)
	d.Resources = []*metav1.APIResourceList{{
		GroupVersion: "kubeflow.org/v2beta1",
		APIResources: []metav1.APIResource{{Name: "mpijobs"}, {Name: "mpijobs/status"}},
	}}

	got, err := ServedResources(d, "kubeflow.org/v2beta1")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]bool{"mpijobs": true, "mpijobs/status": true}; !reflect.DeepEqual(got, want) {
		t.Errorf("ServedResources(served) = %v, want %v", got, want)
	}

	got, err = ServedResources(d, "kubeflow.org/v1")
	if err != nil || got == nil || len(got) != 0 {
		t.Errorf("ServedResources(not served) = %v, %v; want an empty map", got, err)
	}

	down := errors.New("dial tcp 10.0.0.1:443: connect: connection refused")
	d.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, down
	})
	if got, err := ServedResources(d, "kubeflow.org/v2beta1"); !errors.Is(err, down) || got != nil {
		t.Errorf("ServedResources(unreachable) = %v, %v; want %v", got, err, down)
	}
}
