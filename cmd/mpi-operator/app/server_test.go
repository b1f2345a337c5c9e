package app

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"

	mpifake "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned/fake"
	"github.com/kubeflow/mpi-operator/pkg/operator"
)

// waitFor bounds every wait of these tests; the happy paths take
// milliseconds.
const waitFor = 15 * time.Second

func fakeDiscovery(lists ...*metav1.APIResourceList) *fakediscovery.FakeDiscovery {
	d := kubefake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery)
	d.Resources = lists
	return d
}

func resourceList(groupVersion string, names ...string) *metav1.APIResourceList {
	l := &metav1.APIResourceList{GroupVersion: groupVersion}
	for _, n := range names {
		l.APIResources = append(l.APIResources, metav1.APIResource{Name: n})
	}
	return l
}

func TestCheckMPIJobCRD(t *testing.T) {
	installHint := []string{
		"MPIJob CRD is not installed",
		"kubectl apply -f manifests/base/crd.yaml",
		"kubectl apply -k manifests/overlays/standalone",
	}
	cases := []struct {
		name  string
		lists []*metav1.APIResourceList
		fail  error // returned by every discovery request
		want  []string
	}{
		{
			name:  "installed",
			lists: []*metav1.APIResourceList{resourceList("kubeflow.org/v1", "mpijobs", "mpijobs/status", "mpijobs/scale")},
		},
		{
			name:  "group not served",
			lists: []*metav1.APIResourceList{resourceList("batch/v1", "jobs")},
			want:  installHint,
		},
		{
			name:  "no resources at all",
			lists: nil,
			want:  installHint,
		},
		{
			name:  "group served without mpijobs",
			lists: []*metav1.APIResourceList{resourceList("kubeflow.org/v1", "tfjobs", "tfjobs/status", "pytorchjobs")},
			want:  installHint,
		},
		{
			name:  "only another version of the group",
			lists: []*metav1.APIResourceList{resourceList("kubeflow.org/v2beta1", "mpijobs", "mpijobs/status")},
			want:  installHint,
		},
		{
			name:  "no status subresource",
			lists: []*metav1.APIResourceList{resourceList("kubeflow.org/v1", "mpijobs")},
			want:  []string{"no status subresource", "kubectl apply -f manifests/base/crd.yaml"},
		},
		{
			name: "API server unreachable",
			fail: errors.New("dial tcp 10.0.0.1:443: connect: connection refused"),
			want: []string{"checking whether the MPIJob CRD is installed", "connection refused"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := fakeDiscovery(tc.lists...)
			if tc.fail != nil {
				d.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, tc.fail
				})
			}
			err := checkMPIJobCRD(d)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("checkMPIJobCRD() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("checkMPIJobCRD() = nil, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("checkMPIJobCRD() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestCheckPodGroupCRD(t *testing.T) {
	mpi := resourceList("kubeflow.org/v1", "mpijobs", "mpijobs/status")
	if err := checkPodGroupCRD(fakeDiscovery(mpi, resourceList("scheduling.volcano.sh/v1beta1", "podgroups", "podgroups/status", "queues")), "volcano"); err != nil {
		t.Errorf("with volcano installed: %v", err)
	}
	for name, lists := range map[string][]*metav1.APIResourceList{
		"group missing":              {mpi},
		"group served, no podgroups": {mpi, resourceList("scheduling.volcano.sh/v1beta1", "queues")},
	} {
		err := checkPodGroupCRD(fakeDiscovery(lists...), "volcano")
		if err == nil {
			t.Errorf("%s: checkPodGroupCRD() = nil, want an error", name)
			continue
		}
		for _, w := range []string{"--gang-scheduling=volcano", "podgroups", "scheduling.volcano.sh/v1beta1", "Install volcano"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: checkPodGroupCRD() = %q, want it to contain %q", name, err, w)
			}
		}
	}
}

// TestRunFailsWithoutCRD runs the whole start-up against an API server that
// serves no MPIJobs.
func TestRunFailsWithoutCRD(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NotFound(w, r)
	}))
	defer api.Close()
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBEFLOW_NAMESPACE", "")
	opts, err := ParseArgs([]string{"--master=" + api.URL, "--monitoring-port=0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	err = Run(ctx, opts)
	if err == nil || !strings.Contains(err.Error(), "MPIJob CRD is not installed") {
		t.Fatalf("Run() = %v, want the CRD error", err)
	}
}

// TestRestConfig checks what the options give the client configuration;
// operator.BuildRestConfig's own cases are tested in its package.
func TestRestConfig(t *testing.T) {
	o := NewOptions()
	o.MasterURL = "http://127.0.0.1:8080"
	o.QPS, o.Burst = 7.5, 33
	cfg, err := restConfig(o)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "http://127.0.0.1:8080" {
		t.Errorf("Host = %q, want the --master URL", cfg.Host)
	}
	if cfg.QPS != 7.5 || cfg.Burst != 33 {
		t.Errorf("QPS, Burst = %v, %v; want 7.5, 33", cfg.QPS, cfg.Burst)
	}
	if cfg.UserAgent != "mpi-operator" {
		t.Errorf("UserAgent = %q, want mpi-operator", cfg.UserAgent)
	}

	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	if _, err := restConfig(NewOptions()); err == nil || !strings.Contains(err.Error(), "no --kubeConfig, --master or $KUBECONFIG given") {
		t.Errorf("restConfig() out of a cluster = %v, want the missing configuration explained", err)
	}
}

// TestRunControllerPublishesItsHealth runs the controller on fake clients:
// /healthz asks it while it runs, and nothing once it has returned.
func TestRunControllerPublishesItsHealth(t *testing.T) {
	t.Setenv("KUBEFLOW_NAMESPACE", "")
	cs := clients{kube: kubefake.NewClientset(), events: kubefake.NewClientset(), mpi: mpifake.NewSimpleClientset(),
		meta: metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())}
	running := &operator.RunningController{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- runController(ctx, cs, NewOptions(), running) }()

	deadline := time.Now().Add(waitFor)
	for running.Current() == nil {
		if time.Now().After(deadline) {
			t.Fatal("runController did not publish its controller")
		}
		time.Sleep(time.Millisecond)
	}
	if err := running.Healthy(); err != nil {
		t.Errorf("Healthy() of a running controller = %v, want nil", err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("runController() = %v after a stop, want nil", err)
		}
	case <-time.After(waitFor):
		t.Fatal("runController did not return after a stop")
	}
	if running.Current() != nil {
		t.Error("the stopped controller is still published")
	}
}
