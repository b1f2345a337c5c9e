package operator

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

func TestOptionsFlags(t *testing.T) {
	t.Setenv(EnvNamespace, "team-a")
	t.Setenv(EnvKubeConfig, "/env/config")
	o := NewOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlags(fs, "the gang help")
	if got := fs.Lookup("gang-scheduling").Usage; got != "the gang help" {
		t.Errorf("--gang-scheduling usage = %q", got)
	}
	if fs.Lookup("v") == nil {
		t.Error("klog's -v is not registered")
	}
	args := []string{"-threadiness", "4", "--kubeConfig=/flag/config", "-leader-elect=false", "--kube-api-qps=5"}
	if err := ParseFlags(fs, args); err != nil {
		t.Fatal(err)
	}
	o.Complete()
	want := Options{
		KubeConfig:    "/env/config",
		Namespace:     "team-a",
		Threadiness:   4,
		LockNamespace: DefaultLockNamespace,
		QPS:           5,
		Burst:         DefaultKubeAPIBurst,
		MetricsAuth:   MetricsAuthNone,
	}
	if diff := cmp.Diff(want, o); diff != "" {
		t.Errorf("options (-want +got):\n%s", diff)
	}
}

func TestOptionsValidate(t *testing.T) {
	valid := NewOptions()
	if errs := valid.Validate(); len(errs) > 0 {
		t.Fatalf("defaults invalid: %v", errs)
	}
	bad := Options{
		Threadiness:       0,
		QPS:               0,
		Burst:             0,
		MonitoringPort:    70000,
		Namespace:         "Team_A",
		LeaderElect:       true,
		GangSchedulerName: "not a name",
		MetricsAuth:       "token",
	}
	got := errors.Join(bad.Validate()...).Error()
	for _, want := range []string{
		"--threadiness must be at least 1",
		"--kube-api-qps must be greater than 0",
		"--kube-api-burst must be at least 1",
		"--monitoring-port must be between 1 and 65535",
		`--namespace "Team_A" is not a valid namespace name`,
		"--lock-namespace must not be empty when --leader-elect is on",
		`--gang-scheduling "not a name" is not a valid scheduler name`,
		`--metrics-auth must be "none" or "kubernetes", got "token"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("errors lack %q:\n%s", want, got)
		}
	}

	profiling := NewOptions()
	profiling.Profiling = true
	if got := errors.Join(profiling.Validate()...); got == nil || !strings.Contains(got.Error(), "--profiling needs --monitoring-port") {
		t.Errorf("--profiling without a monitoring port: %v", got)
	}
	profiling.MonitoringPort = 8080
	if errs := profiling.Validate(); len(errs) > 0 {
		t.Errorf("--profiling with a monitoring port: %v", errs)
	}
}
