package operator

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
)

func TestNewKubeClients(t *testing.T) {
	cs, err := NewKubeClients(&rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if cs.Kube == nil || cs.Events == nil || cs.Meta == nil || cs.Kube == cs.Events {
		t.Errorf("clients %+v: want three, the events client apart", cs)
	}
}

func TestCheckServed(t *testing.T) {
	req := Requirement{
		What: "the MPIJob CRD", GroupVersion: "kubeflow.org/v2beta1", Resource: "mpijobs", Status: true,
		Missing: "Install it.", MissingStatus: "no status subresource",
	}
	cases := []struct {
		name      string
		resources []metav1.APIResource
		want      string // "" means no error
	}{
		{"served with status", []metav1.APIResource{{Name: "mpijobs"}, {Name: "mpijobs/status"}}, ""},
		{"not served", nil, "the MPIJob CRD is not installed: the API server does not serve mpijobs in kubeflow.org/v2beta1. Install it."},
		{"no status", []metav1.APIResource{{Name: "mpijobs"}}, "no status subresource"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := kubefake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery)
			if tc.resources != nil {
				d.Resources = []*metav1.APIResourceList{{GroupVersion: req.GroupVersion, APIResources: tc.resources}}
			}
			err := CheckServed(d, req)
			if (err == nil) != (tc.want == "") || err != nil && err.Error() != tc.want {
				t.Errorf("CheckServed() = %v, want %q", err, tc.want)
			}
		})
	}
}

// fakeController runs run and records what RunController did with it.
type fakeController struct {
	run         func(ctx context.Context) error
	threadiness int
}

func (f *fakeController) Healthy() error { return nil }
func (f *fakeController) Run(ctx context.Context, threadiness int) error {
	f.threadiness = threadiness
	return f.run(ctx)
}

type fakeInformers struct{ started, shut bool }

func (f *fakeInformers) Start(<-chan struct{}) { f.started = true }
func (f *fakeInformers) Shutdown()             { f.shut = true }

func TestRunController(t *testing.T) {
	cases := []struct {
		name string
		run  func(ctx context.Context, cancel context.CancelFunc) error
		want string // "" means nil
	}{
		{"stopped", func(ctx context.Context, cancel context.CancelFunc) error {
			cancel()
			return errors.New("cache sync cut short")
		}, ""},
		{"fails", func(context.Context, context.CancelFunc) error { return errors.New("boom") },
			"running the MPIJob controller: boom"},
		{"returns early", func(context.Context, context.CancelFunc) error { return nil },
			"the MPIJob controller stopped unexpectedly"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			running := &RunningController{}
			inf := &fakeInformers{}
			c := &fakeController{}
			c.run = func(ctx context.Context) error {
				if running.Current() != c {
					t.Error("the controller is not published while it runs")
				}
				return tc.run(ctx, cancel)
			}
			err := RunController(ctx, running, 3, func(context.Context) (Informers, Controller) { return inf, c })
			if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("RunController() = %v, want %q", err, tc.want)
			}
			if !inf.started || !inf.shut || c.threadiness != 3 || running.Current() != nil {
				t.Errorf("started %t, shut down %t, threadiness %d, still published %v", inf.started, inf.shut, c.threadiness, running.Current())
			}
		})
	}
}
