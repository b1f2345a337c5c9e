package operator

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/kubeflow/mpi-operator/pkg/version"
)

// testOptions is a binary's options: the shared ones and a flag of its own.
type testOptions struct {
	Options
	own string
}

func (o *testOptions) Validate() error {
	if o.own == "bad" {
		return errors.New("--own must not be bad")
	}
	return nil
}

func parseTest(args []string, output io.Writer) (*testOptions, error) {
	o := &testOptions{Options: NewOptions()}
	fs := pflag.NewFlagSet("test-operator", pflag.ContinueOnError)
	fs.SetOutput(output)
	o.AddFlags(fs, "gang")
	fs.StringVar(&o.own, "own", "", "a flag of its own")
	return o, ParseFlags(fs, args)
}

// Main exits 0, 1 or 2 and says why, and runs the binary only when its
// flags are good.
func TestMainExitCodes(t *testing.T) {
	cases := []struct {
		name           string
		args           []string
		runErr         error
		code           int
		stdout, stderr string // fragments
		ran            bool
	}{
		{name: "runs and stops", args: []string{"-own", "x"}, code: 0, ran: true},
		{name: "run fails", runErr: errors.New("boom"), code: 1, stderr: "test-operator: boom", ran: true},
		{name: "help", args: []string{"--help"}, code: 0, stderr: "--own"},
		{name: "unknown flag", args: []string{"--nope"}, code: 2, stderr: "unknown flag: --nope"},
		{name: "version", args: []string{"-version"}, code: 0, stdout: version.String()},
		{name: "invalid", args: []string{"--own=bad"}, code: 2, stderr: "test-operator: invalid flags:\n--own must not be bad"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			ran := false
			code := Main("test-operator", tc.args, &stdout, &stderr, parseTest, func(ctx context.Context, o *testOptions) error {
				ran = true
				if ctx.Err() != nil {
					t.Error("run got a done context")
				}
				return tc.runErr
			})
			if code != tc.code || ran != tc.ran {
				t.Errorf("exit %d, ran %t; want %d, %t", code, ran, tc.code, tc.ran)
			}
			if !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stdout %q, stderr %q; want %q and %q in them", stdout.String(), stderr.String(), tc.stdout, tc.stderr)
			}
		})
	}
}
