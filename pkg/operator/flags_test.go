package operator

import (
	"errors"
	goflag "flag"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

// testFlags are an operator's flags of every kind, with klog's.
type testFlags struct {
	kubeConfig, namespace, lockNamespace string
	threadiness                          int
	leaderElect                          bool
}

func newTestFlagSet(out *strings.Builder) (*pflag.FlagSet, *testFlags) {
	f := &testFlags{threadiness: 2, leaderElect: true}
	fs := pflag.NewFlagSet("test-operator", pflag.ContinueOnError)
	if out != nil {
		fs.SetOutput(out)
	}
	fs.StringVar(&f.kubeConfig, "kubeConfig", f.kubeConfig, "Path to a kubeconfig.")
	fs.StringVar(&f.namespace, "namespace", f.namespace, "Namespace to watch.")
	fs.StringVar(&f.lockNamespace, "lock-namespace", f.lockNamespace, "Namespace of the Lease.")
	fs.IntVar(&f.threadiness, "threadiness", f.threadiness, "Workers.")
	fs.BoolVar(&f.leaderElect, "leader-elect", f.leaderElect, "Elect a leader.")
	fs.AddGoFlagSet(KlogFlags())
	return fs, f
}

// resetKlogFlags sets klog's process-wide flags back to their defaults when
// the test ends.
func resetKlogFlags(t *testing.T) {
	t.Cleanup(func() {
		KlogFlags().VisitAll(func(f *goflag.Flag) {
			if f.Value.String() == f.DefValue {
				return
			}
			if err := f.Value.Set(f.DefValue); err != nil {
				t.Errorf("resetting klog's -%s: %v", f.Name, err)
			}
		})
	})
}

func TestKlogFlagsAreRegisteredOnce(t *testing.T) {
	first, second := KlogFlags(), KlogFlags()
	if first != second {
		t.Error("KlogFlags() returned two flag sets")
	}
	for _, name := range []string{"v", "vmodule", "alsologtostderr", "logtostderr"} {
		if KlogFlags().Lookup(name) == nil {
			t.Errorf("KlogFlags() has no -%s", name)
		}
	}
}

func TestGoStyleArgs(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{name: "nothing", args: nil, want: []string{}},
		{
			name: "single-dash long flags become double-dash",
			args: []string{"-alsologtostderr", "-threadiness", "2", "-namespace=ml"},
			want: []string{"--alsologtostderr", "--threadiness", "2", "--namespace=ml"},
		},
		{
			name: "double-dash flags stay",
			args: []string{"--alsologtostderr", "--threadiness", "2", "--namespace=ml"},
			want: []string{"--alsologtostderr", "--threadiness", "2", "--namespace=ml"},
		},
		{
			name: "one-letter shorthands stay",
			args: []string{"-v", "4", "-v=2", "-h"},
			want: []string{"-v", "4", "-v=2", "-h"},
		},
		{
			name: "the value of a flag is never rewritten",
			args: []string{"--namespace", "-x", "-kubeConfig", "-config", "-v", "-vmodule"},
			want: []string{"--namespace", "-x", "--kubeConfig", "-config", "-v", "-vmodule"},
		},
		{
			name: "a boolean takes no separate value",
			args: []string{"-leader-elect", "-lock-namespace", "kubeflow"},
			want: []string{"--leader-elect", "--lock-namespace", "kubeflow"},
		},
		{
			name: "a value after = leaves the next argument alone",
			args: []string{"-namespace=ml", "-threadiness", "3"},
			want: []string{"--namespace=ml", "--threadiness", "3"},
		},
		{
			name: "a flag needing a value at the end",
			args: []string{"-namespace"},
			want: []string{"--namespace"},
		},
		{
			name: "unknown names are rewritten too, and take no value",
			args: []string{"-no-such-flag", "-threadiness=2"},
			want: []string{"--no-such-flag", "--threadiness=2"},
		},
		{
			name: "positional arguments and a lone dash stay",
			args: []string{"extra", "-", "-threadiness=2"},
			want: []string{"extra", "-", "--threadiness=2"},
		},
		{
			name: "nothing after the terminator changes",
			args: []string{"-threadiness=2", "--", "-namespace", "ml"},
			want: []string{"--threadiness=2", "--", "-namespace", "ml"},
		},
		{
			name: "a terminator given as a value is a value",
			args: []string{"-namespace", "--", "-threadiness=2"},
			want: []string{"--namespace", "--", "--threadiness=2"},
		},
	}
	fs, _ := newTestFlagSet(nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := GoStyleArgs(fs, tc.args); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("GoStyleArgs(%q) = %q, want %q", tc.args, got, tc.want)
			}
		})
	}
}

func TestParseFlags(t *testing.T) {
	var out strings.Builder
	fs, f := newTestFlagSet(&out)
	args := []string{"-alsologtostderr", "-threadiness", "8", "-namespace=ml", "--lock-namespace", "kubeflow", "-leader-elect=false", "-v", "3"}
	resetKlogFlags(t)
	if err := ParseFlags(fs, args); err != nil {
		t.Fatalf("ParseFlags(%q) = %v", args, err)
	}
	want := testFlags{namespace: "ml", lockNamespace: "kubeflow", threadiness: 8}
	if *f != want {
		t.Errorf("ParseFlags(%q) set %+v, want %+v", args, *f, want)
	}
	if v := KlogFlags().Lookup("alsologtostderr").Value.String(); v != "true" {
		t.Errorf("-alsologtostderr = %s, want true", v)
	}
	if v := KlogFlags().Lookup("v").Value.String(); v != "3" || !klog.V(3).Enabled() {
		t.Errorf("-v = %s, want 3 and klog's verbosity raised", v)
	}
	if out.Len() != 0 {
		t.Errorf("ParseFlags(%q) printed %q, want nothing", args, out.String())
	}
}

func TestParseFlagsErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{name: "unknown flag", args: []string{"--no-such-flag"}, want: "unknown flag: --no-such-flag"},
		{name: "unknown single-dash flag", args: []string{"-no-such-flag=3"}, want: "unknown flag: --no-such-flag"},
		{name: "positional argument", args: []string{"extra"}, want: `unexpected arguments ["extra"]: test-operator takes only flags`},
		{name: "a boolean takes no separate value", args: []string{"-leader-elect", "false"}, want: "unexpected arguments"},
		{name: "flags after the terminator", args: []string{"--", "-threadiness=2"}, want: "unexpected arguments"},
		{name: "not a number", args: []string{"-threadiness", "many"}, want: "threadiness"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			fs, _ := newTestFlagSet(&out)
			err := ParseFlags(fs, tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseFlags(%q) = %v, want it to mention %q", tc.args, err, tc.want)
			}
			if !strings.HasPrefix(out.String(), "test-operator: ") || !strings.Contains(out.String(), tc.want) ||
				!strings.HasSuffix(out.String(), "\nRun test-operator --help for the list of flags.\n") {
				t.Errorf("ParseFlags(%q) printed %q", tc.args, out.String())
			}
		})
	}
}

func TestParseFlagsHelp(t *testing.T) {
	for _, help := range []string{"--help", "-help", "-h"} {
		var out strings.Builder
		fs, _ := newTestFlagSet(&out)
		if err := ParseFlags(fs, []string{help}); !errors.Is(err, pflag.ErrHelp) {
			t.Fatalf("%s: ParseFlags() = %v, want %v", help, err, pflag.ErrHelp)
		}
		for _, flag := range []string{"--namespace", "--threadiness", "-v, --v"} {
			if !strings.Contains(out.String(), flag) {
				t.Errorf("%s: usage does not list %s", help, flag)
			}
		}
		if strings.Contains(out.String(), "Run test-operator --help") {
			t.Errorf("%s: the usage is followed by an error: %q", help, out.String())
		}
	}
}
