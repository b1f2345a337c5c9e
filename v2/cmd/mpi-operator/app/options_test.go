package app

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kubeflow/mpi-operator/pkg/operator"
)

func parse(t *testing.T, args ...string) (*Options, string) {
	t.Helper()
	t.Setenv(operator.EnvKubeConfig, "")
	t.Setenv(operator.EnvNamespace, "")
	var out strings.Builder
	o, err := ParseArgs(args, &out)
	if err != nil {
		t.Fatalf("ParseArgs(%q): %v\n%s", args, err, out.String())
	}
	return o, out.String()
}

func TestParseArgs(t *testing.T) {
	defaults := NewOptions()
	cases := []struct {
		name string
		args []string
		want func(o *Options)
	}{
		{name: "defaults", want: func(*Options) {}},
		{
			// The arguments of upstream v0.8.0's deploy manifest.
			name: "upstream's deployment",
			args: []string{"-alsologtostderr", "--lock-namespace=mpi-operator"},
			want: func(*Options) {},
		},
		{
			name: "every flag of its own",
			args: []string{"--cluster-domain=cluster.local", "-refresh-launcher=false", "--gang-scheduling=scheduler-plugins-scheduler",
				"-controller-queue-rate-limit", "20", "--controller-queue-burst=200"},
			want: func(o *Options) {
				o.ClusterDomain = "cluster.local"
				o.RefreshLauncher = false
				o.GangSchedulerName = "scheduler-plugins-scheduler"
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := parse(t, tc.args...)
			want := *defaults
			want.Namespace = ""
			tc.want(&want)
			if diff := cmp.Diff(want, *got, cmpopts.IgnoreUnexported(Options{})); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

func TestObsoleteFlagsWarn(t *testing.T) {
	_, out := parse(t, "--controller-queue-burst=5")
	if !strings.Contains(out, "controller-queue-burst has been deprecated") || !strings.Contains(out, "only failed syncs back off") {
		t.Errorf("no deprecation warning: %q", out)
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		change func(o *Options)
		want   string // "" means valid
	}{
		{"defaults", func(*Options) {}, ""},
		{"cluster domain", func(o *Options) { o.ClusterDomain = "cluster.local" }, ""},
		{"cluster domain too long", func(o *Options) { o.ClusterDomain = strings.Repeat("a.", 127) + "b" },
			"--cluster-domain may have at most 253 characters, got 255"},
		{"cluster domain not a name", func(o *Options) { o.ClusterDomain = "Cluster_Local" },
			`--cluster-domain "Cluster_Local" is not a valid DNS name`},
		{"shared flags", func(o *Options) { o.Threadiness = 0 }, "--threadiness must be at least 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			tc.change(o)
			err := o.Validate()
			if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}
