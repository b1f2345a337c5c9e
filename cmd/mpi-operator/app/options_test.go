package app

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

func TestParseArgs(t *testing.T) {
	defaults := Options{
		Threadiness:          2,
		KubectlDeliveryImage: "mpioperator/kubectl-delivery:latest",
		LockNamespace:        "mpi-operator",
		QPS:                  200,
		Burst:                400,
		RefreshLauncher:      true,
		LeaderElect:          true,
	}
	with := func(change func(o *Options)) Options {
		o := defaults
		change(&o)
		return o
	}

	cases := []struct {
		name string
		args []string
		env  map[string]string
		want Options
	}{
		{
			name: "defaults",
			want: defaults,
		},
		{
			name: "namespace defaults to KUBEFLOW_NAMESPACE",
			env:  map[string]string{"KUBEFLOW_NAMESPACE": "team-a"},
			want: with(func(o *Options) { o.Namespace = "team-a" }),
		},
		{
			name: "--namespace beats KUBEFLOW_NAMESPACE",
			args: []string{"--namespace=team-b"},
			env:  map[string]string{"KUBEFLOW_NAMESPACE": "team-a"},
			want: with(func(o *Options) { o.Namespace = "team-b" }),
		},
		{
			name: "empty --namespace means all namespaces",
			args: []string{"--namespace="},
			env:  map[string]string{"KUBEFLOW_NAMESPACE": "team-a"},
			want: defaults,
		},
		{
			name: "--kubeConfig without KUBECONFIG",
			args: []string{"--kubeConfig", "/flag/config"},
			want: with(func(o *Options) { o.KubeConfig = "/flag/config" }),
		},
		{
			name: "KUBECONFIG beats --kubeConfig",
			args: []string{"--kubeConfig", "/flag/config"},
			env:  map[string]string{"KUBECONFIG": "/env/config"},
			want: with(func(o *Options) { o.KubeConfig = "/env/config" }),
		},
		{
			name: "KUBECONFIG alone",
			env:  map[string]string{"KUBECONFIG": "/env/config"},
			want: with(func(o *Options) { o.KubeConfig = "/env/config" }),
		},
		{
			name: "every flag",
			args: []string{
				"--master=https://10.0.0.1:6443",
				"--namespace=ml",
				"--threadiness=8",
				"--kubectl-delivery-image=registry.local/kubectl-delivery:v1",
				"--gang-scheduling=volcano",
				"--monitoring-port=8080",
				"--lock-namespace=kubeflow",
				"--kube-api-qps=5",
				"--kube-api-burst=10",
				"--version",
				"--refresh-launcher=false",
				"--leader-elect=false",
			},
			want: Options{
				MasterURL:            "https://10.0.0.1:6443",
				Namespace:            "ml",
				Threadiness:          8,
				KubectlDeliveryImage: "registry.local/kubectl-delivery:v1",
				GangSchedulerName:    "volcano",
				MonitoringPort:       8080,
				LockNamespace:        "kubeflow",
				QPS:                  5,
				Burst:                10,
				PrintVersion:         true,
				RefreshLauncher:      false,
				LeaderElect:          false,
			},
		},
		{
			name: "klog flags are accepted",
			args: []string{"-v=0", "--vmodule=", "--logtostderr=true"},
			want: defaults,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", "")
			t.Setenv("KUBEFLOW_NAMESPACE", "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			got, err := ParseArgs(tc.args, io.Discard)
			if err != nil {
				t.Fatalf("ParseArgs(%q): %v", tc.args, err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("ParseArgs(%q)\n got: %+v\nwant: %+v", tc.args, *got, tc.want)
			}
		})
	}
}

func TestParseArgsVerbosity(t *testing.T) {
	t.Cleanup(func() {
		if _, err := ParseArgs([]string{"-v=0"}, io.Discard); err != nil {
			t.Errorf("resetting -v: %v", err)
		}
	})
	if _, err := ParseArgs([]string{"-v=4"}, io.Discard); err != nil {
		t.Fatalf("ParseArgs(-v=4): %v", err)
	}
	if !klog.V(4).Enabled() {
		t.Error("-v=4 did not raise klog's verbosity")
	}
}

func TestParseArgsErrors(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		want    string
		wantErr error
	}{
		{name: "unknown flag", args: []string{"--no-such-flag"}, want: "unknown flag"},
		{name: "not a number", args: []string{"--threadiness=many"}, want: "threadiness"},
		{name: "positional argument", args: []string{"extra"}, want: "unexpected arguments"},
		{name: "help", args: []string{"--help"}, wantErr: pflag.ErrHelp},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			_, err := ParseArgs(tc.args, &out)
			if err == nil {
				t.Fatalf("ParseArgs(%q) succeeded", tc.args)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("ParseArgs(%q) = %v, want %v", tc.args, err, tc.wantErr)
			}
			if tc.want != "" && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseArgs(%q) = %v, want it to mention %q", tc.args, err, tc.want)
			}
			if out.Len() == 0 {
				t.Errorf("ParseArgs(%q) wrote nothing for the user", tc.args)
			}
		})
	}
}

func TestHelpListsFlags(t *testing.T) {
	var out strings.Builder
	if _, err := ParseArgs([]string{"--help"}, &out); !errors.Is(err, pflag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	for _, flag := range []string{
		"--kubeConfig", "--master", "--namespace", "--threadiness", "--kubectl-delivery-image",
		"--gang-scheduling", "--monitoring-port", "--lock-namespace", "--kube-api-qps",
		"--kube-api-burst", "--version", "--refresh-launcher", "--leader-elect", "-v, --v",
	} {
		if !strings.Contains(out.String(), flag) {
			t.Errorf("usage does not list %s", flag)
		}
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		change func(o *Options)
		// want lists the fragments the error must contain; none means valid.
		want []string
	}{
		{name: "defaults", change: func(*Options) {}},
		{name: "port 0 turns monitoring off", change: func(o *Options) { o.MonitoringPort = 0 }},
		{name: "highest port", change: func(o *Options) { o.MonitoringPort = 65535 }},
		{name: "no lock namespace without leader election", change: func(o *Options) { o.LeaderElect = false; o.LockNamespace = "" }},
		{name: "gang scheduling", change: func(o *Options) { o.GangSchedulerName = "volcano" }},
		{name: "fractional qps", change: func(o *Options) { o.QPS = 0.5 }},
		{
			name:   "zero threadiness",
			change: func(o *Options) { o.Threadiness = 0 },
			want:   []string{"--threadiness must be at least 1, got 0"},
		},
		{
			name:   "zero qps",
			change: func(o *Options) { o.QPS = 0 },
			want:   []string{"--kube-api-qps must be greater than 0, got 0"},
		},
		{
			name:   "negative qps",
			change: func(o *Options) { o.QPS = -1 },
			want:   []string{"--kube-api-qps must be greater than 0, got -1"},
		},
		{
			name:   "zero burst",
			change: func(o *Options) { o.Burst = 0 },
			want:   []string{"--kube-api-burst must be at least 1, got 0"},
		},
		{
			name:   "port too high",
			change: func(o *Options) { o.MonitoringPort = 65536 },
			want:   []string{"--monitoring-port must be between 1 and 65535, or 0", "got 65536"},
		},
		{
			name:   "negative port",
			change: func(o *Options) { o.MonitoringPort = -1 },
			want:   []string{"--monitoring-port", "got -1"},
		},
		{
			name:   "empty image",
			change: func(o *Options) { o.KubectlDeliveryImage = " " },
			want:   []string{"--kubectl-delivery-image must not be empty"},
		},
		{
			name:   "bad namespace",
			change: func(o *Options) { o.Namespace = "Team_A" },
			want:   []string{`--namespace "Team_A" is not a valid namespace name`},
		},
		{
			name:   "empty lock namespace",
			change: func(o *Options) { o.LockNamespace = "" },
			want:   []string{"--lock-namespace must not be empty"},
		},
		{
			name:   "bad lock namespace",
			change: func(o *Options) { o.LockNamespace = "mpi.operator" },
			want:   []string{`--lock-namespace "mpi.operator" is not a valid namespace name`},
		},
		{
			name:   "bad scheduler name",
			change: func(o *Options) { o.GangSchedulerName = "Volcano Scheduler" },
			want:   []string{`--gang-scheduling "Volcano Scheduler" is not a valid scheduler name`},
		},
		{
			name: "every problem is reported",
			change: func(o *Options) {
				o.Threadiness = -3
				o.QPS = 0
				o.MonitoringPort = 99999
			},
			want: []string{"--threadiness", "--kube-api-qps", "--monitoring-port"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBEFLOW_NAMESPACE", "")
			o := NewOptions()
			tc.change(o)
			err := o.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() succeeded, want an error mentioning %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}
