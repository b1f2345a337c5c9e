package app

import (
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/kubeflow/mpi-operator/pkg/operator"
)

// defaults are the Options without flags or environment.
var defaults = Options{
	Options: operator.Options{
		Threadiness:   2,
		LockNamespace: "mpi-operator",
		QPS:           200,
		Burst:         400,
		LeaderElect:   true,
		MetricsAuth:   "none",
	},
	KubectlDeliveryImage: "ghcr.io/kubeflow/mpi-operator-elastic/kubectl-delivery:latest",
	RefreshLauncher:      true,
}

// with returns the defaults after change.
func with(change func(o *Options)) Options {
	o := defaults
	change(&o)
	return o
}

// parseClean parses args with an empty environment and fails the test on an
// error; it returns the Options and what the parse wrote for the user.
func parseClean(t *testing.T, args []string) (Options, string) {
	t.Helper()
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBEFLOW_NAMESPACE", "")
	var out strings.Builder
	got, err := ParseArgs(args, &out)
	if err != nil {
		t.Fatalf("ParseArgs(%q): %v\noutput: %s", args, err, out.String())
	}
	return *got, out.String()
}

// klogFlag reads one of klog's process-wide flags, and restores its value
// when the test ends.
func klogFlag(t *testing.T, name string) string {
	t.Helper()
	f := operator.KlogFlags().Lookup(name)
	if f == nil {
		t.Fatalf("klog has no flag %q", name)
	}
	v := f.Value.String()
	t.Cleanup(func() {
		if err := f.Value.Set(f.DefValue); err != nil {
			t.Errorf("restoring klog's -%s: %v", name, err)
		}
	})
	return v
}

func TestParseArgs(t *testing.T) {
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
				"--metrics-auth=kubernetes",
				"--lock-namespace=kubeflow",
				"--kube-api-qps=5",
				"--kube-api-burst=10",
				"--version",
				"--refresh-launcher=false",
				"--leader-elect=false",
			},
			want: Options{
				Options: operator.Options{
					MasterURL:         "https://10.0.0.1:6443",
					Namespace:         "ml",
					Threadiness:       8,
					GangSchedulerName: "volcano",
					MonitoringPort:    8080,
					MetricsAuth:       "kubernetes",
					LockNamespace:     "kubeflow",
					QPS:               5,
					Burst:             10,
					PrintVersion:      true,
					LeaderElect:       false,
				},
				KubectlDeliveryImage: "registry.local/kubectl-delivery:v1",
				RefreshLauncher:      false,
			},
		},
		{
			name: "klog flags are accepted",
			args: []string{"-v=0", "--vmodule=", "--logtostderr=true"},
			want: defaults,
		},
		{
			name: "klog flags with one dash",
			args: []string{"-vmodule=", "-logtostderr", "-add_dir_header=false", "-log_file_max_size", "1800"},
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

// TestParseArgsVerbosity checks klog's one-letter -v, which pflag takes
// both as the shorthand -v and as the long flag --v.
func TestParseArgsVerbosity(t *testing.T) {
	for _, args := range [][]string{
		{"-v=4"},
		{"-v", "4"},
		{"--v=4"},
		{"--v", "4"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			parseClean(t, args)
			if got := klogFlag(t, "v"); got != "4" {
				t.Errorf("ParseArgs(%q) set -v to %s, want 4", args, got)
			}
			if !klog.V(4).Enabled() {
				t.Errorf("ParseArgs(%q) did not raise klog's verbosity", args)
			}
		})
	}
}

// TestParseArgsUpstreamCommandLines parses the arguments that upstream's
// manifests and Helm chart pass to its v1 operator, which used Go's flag
// package.
func TestParseArgsUpstreamCommandLines(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want Options
		// warnings are the deprecation warnings the parse must print.
		warnings []string
	}{
		{
			name: "deploy/v1",
			args: []string{"-alsologtostderr", "--kubectl-delivery-image", "mpioperator/kubectl-delivery:latest",
				"--namespace", "mpi-operator", "--lock-namespace", "mpi-operator"},
			want: with(func(o *Options) {
				o.Namespace = "mpi-operator"
				o.KubectlDeliveryImage = "mpioperator/kubectl-delivery:latest"
			}),
		},
		{
			name: "kustomize",
			args: []string{"-alsologtostderr", "--lock-namespace", "mpi-operator"},
			want: defaults,
		},
		{
			name: "kustomize, lock namespace with =",
			args: []string{"-alsologtostderr", "--lock-namespace=mpi-operator"},
			want: defaults,
		},
		{
			name: "Helm chart",
			args: []string{"-alsologtostderr", "--gpus-per-node", "8", "-threadiness", "2",
				"--kubectl-delivery-image", "registry.local/kubectl-delivery:0.3.0"},
			want: with(func(o *Options) {
				o.Threadiness = 2
				o.KubectlDeliveryImage = "registry.local/kubectl-delivery:0.3.0"
			}),
			warnings: []string{"Flag --gpus-per-node has been deprecated, it is ignored"},
		},
		{
			name: "Helm chart, other values",
			args: []string{"-alsologtostderr", "--gpus-per-node", "1", "-threadiness", "16",
				"--kubectl-delivery-image", "mpioperator/kubectl-delivery:latest", "--lock-namespace", "kubeflow"},
			want: with(func(o *Options) {
				o.Threadiness = 16
				o.LockNamespace = "kubeflow"
				o.KubectlDeliveryImage = "mpioperator/kubectl-delivery:latest"
			}),
			warnings: []string{"Flag --gpus-per-node has been deprecated, it is ignored"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, out := parseClean(t, tc.args)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseArgs(%q)\n got: %+v\nwant: %+v", tc.args, got, tc.want)
			}
			if v := klogFlag(t, "alsologtostderr"); v != "true" {
				t.Errorf("ParseArgs(%q) left klog's -alsologtostderr at %s, want true", tc.args, v)
			}
			for _, w := range tc.warnings {
				if !strings.Contains(out, w) {
					t.Errorf("ParseArgs(%q) printed %q, want it to contain %q", tc.args, out, w)
				}
			}
			if len(tc.warnings) == 0 && out != "" {
				t.Errorf("ParseArgs(%q) printed %q, want nothing", tc.args, out)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("ParseArgs(%q) gave invalid options: %v", tc.args, err)
			}
		})
	}
}

// TestParseArgsDashStyles gives each of the operator's flags in every form
// Go's flag package accepts, plus pflag's.
func TestParseArgsDashStyles(t *testing.T) {
	valued := []struct {
		flag, value string
		want        func(o *Options)
	}{
		{"kubeConfig", "/flag/config", func(o *Options) { o.KubeConfig = "/flag/config" }},
		{"master", "https://10.0.0.1:6443", func(o *Options) { o.MasterURL = "https://10.0.0.1:6443" }},
		{"namespace", "ml", func(o *Options) { o.Namespace = "ml" }},
		{"threadiness", "8", func(o *Options) { o.Threadiness = 8 }},
		{"kubectl-delivery-image", "registry.local/kd:v1", func(o *Options) { o.KubectlDeliveryImage = "registry.local/kd:v1" }},
		{"gang-scheduling", "volcano", func(o *Options) { o.GangSchedulerName = "volcano" }},
		{"monitoring-port", "8080", func(o *Options) { o.MonitoringPort = 8080 }},
		{"lock-namespace", "kubeflow", func(o *Options) { o.LockNamespace = "kubeflow" }},
		{"kube-api-qps", "5", func(o *Options) { o.QPS = 5 }},
		{"kube-api-burst", "10", func(o *Options) { o.Burst = 10 }},
	}
	type form struct {
		args []string
		want Options
	}
	var forms []form
	for _, v := range valued {
		want := with(v.want)
		for _, dashes := range []string{"-", "--"} {
			forms = append(forms,
				form{[]string{dashes + v.flag + "=" + v.value}, want},
				form{[]string{dashes + v.flag, v.value}, want})
		}
	}
	booleans := []struct {
		flag string
		set  func(o *Options, v bool)
	}{
		{"version", func(o *Options, v bool) { o.PrintVersion = v }},
		{"refresh-launcher", func(o *Options, v bool) { o.RefreshLauncher = v }},
		{"leader-elect", func(o *Options, v bool) { o.LeaderElect = v }},
	}
	for _, b := range booleans {
		on := with(func(o *Options) { b.set(o, true) })
		off := with(func(o *Options) { b.set(o, false) })
		for _, dashes := range []string{"-", "--"} {
			forms = append(forms,
				form{[]string{dashes + b.flag}, on},
				form{[]string{dashes + b.flag + "=true"}, on},
				form{[]string{dashes + b.flag + "=false"}, off})
		}
	}
	for _, f := range forms {
		t.Run(strings.Join(f.args, " "), func(t *testing.T) {
			got, _ := parseClean(t, f.args)
			if !reflect.DeepEqual(got, f.want) {
				t.Errorf("ParseArgs(%q)\n got: %+v\nwant: %+v", f.args, got, f.want)
			}
		})
	}
}

// TestParseArgsObsoleteFlags passes the flags of upstream's operator that
// this one ignores: each is accepted, changes nothing and is warned about.
func TestParseArgsObsoleteFlags(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--gpus-per-node", "8"}, "Flag --gpus-per-node has been deprecated, it is ignored: the slots of each worker come from the MPIJob's spec.slotsPerWorker"},
		{[]string{"-gpus-per-node=4"}, "Flag --gpus-per-node has been deprecated, it is ignored"},
		{[]string{"--processing-units-per-node=2"}, "Flag --processing-units-per-node has been deprecated, it is ignored: the slots of each worker come from the MPIJob's spec.slotsPerWorker"},
		{[]string{"-processing-units-per-node", "2"}, "Flag --processing-units-per-node has been deprecated, it is ignored"},
		{[]string{"--processing-resource-type", "nvidia.com/gpu"}, "Flag --processing-resource-type has been deprecated, it is ignored"},
		{[]string{"-processing-resource-type=cpu"}, "Flag --processing-resource-type has been deprecated, it is ignored"},
		{[]string{"--enable-gang-scheduling"}, "Flag --enable-gang-scheduling has been deprecated, it is ignored: use --gang-scheduling=<scheduler name>"},
		{[]string{"-enable-gang-scheduling=false"}, "Flag --enable-gang-scheduling has been deprecated, it is ignored: use --gang-scheduling"},
		// A boolean takes no separate value: the namespace stays a flag.
		{[]string{"-enable-gang-scheduling", "-namespace=ml"}, "Flag --enable-gang-scheduling has been deprecated"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			got, out := parseClean(t, tc.args)
			want := defaults
			if slices.Contains(tc.args, "-namespace=ml") {
				want.Namespace = "ml"
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("ParseArgs(%q)\n got: %+v\nwant: %+v", tc.args, got, want)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("ParseArgs(%q) printed %q, want it to contain %q", tc.args, out, tc.want)
			}
		})
	}
}

func TestParseArgsErrors(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		want    string
		wantErr error
	}{
		{name: "unknown flag", args: []string{"--no-such-flag"}, want: "unknown flag: --no-such-flag"},
		{name: "unknown single-dash flag", args: []string{"-no-such-flag"}, want: "unknown flag: --no-such-flag"},
		{name: "unknown single-dash flag with a value", args: []string{"-no-such-flag=3"}, want: "unknown flag: --no-such-flag"},
		{name: "unknown shorthand", args: []string{"-x"}, want: "unknown shorthand flag: 'x'"},
		{name: "a boolean takes no separate value", args: []string{"-leader-elect", "false"}, want: "unexpected arguments"},
		{name: "flags after the terminator", args: []string{"--", "-threadiness=2"}, want: "unexpected arguments"},
		{name: "missing value", args: []string{"-namespace"}, want: "flag needs an argument: --namespace"},
		{name: "single-dash value not a number", args: []string{"-threadiness", "many"}, want: "threadiness"},
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
			if tc.want != "" && !strings.Contains(out.String(), tc.want) {
				t.Errorf("ParseArgs(%q) printed %q, want it to mention %q", tc.args, out.String(), tc.want)
			}
		})
	}
}

func TestHelpListsFlags(t *testing.T) {
	for _, help := range []string{"--help", "-help", "-h"} {
		var out strings.Builder
		if _, err := ParseArgs([]string{help}, &out); !errors.Is(err, pflag.ErrHelp) {
			t.Fatalf("%s: %v", help, err)
		}
		for _, flag := range []string{
			"--kubeConfig", "--master", "--namespace", "--threadiness", "--kubectl-delivery-image",
			"--gang-scheduling", "--monitoring-port", "--lock-namespace", "--kube-api-qps",
			"--kube-api-burst", "--version", "--refresh-launcher", "--leader-elect", "-v, --v",
		} {
			if !strings.Contains(out.String(), flag) {
				t.Errorf("%s: usage does not list %s", help, flag)
			}
		}
		// The obsolete flags work but are not advertised.
		for _, flag := range []string{"gpus-per-node", "processing-units-per-node", "processing-resource-type", "enable-gang-scheduling"} {
			if strings.Contains(out.String(), flag) {
				t.Errorf("%s: usage lists the obsolete --%s", help, flag)
			}
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
