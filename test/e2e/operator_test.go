package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// currentOperator is the running operator, if any; waits end early when it
// dies.
var currentOperator *harness.Operator

// startOperator starts the operator with the given kubeconfig, logging to
// logPath, on a free monitoring port, and waits for its /healthz.
func startOperator(t *testing.T, kubeconfig, logPath string, extraArgs ...string) *harness.Operator {
	t.Helper()
	return runOperator(t, harness.OperatorConfig{Kubeconfig: kubeconfig, LogPath: logPath, Args: append([]string{
		"--lock-namespace=mpi-operator",
		"--kubectl-delivery-image=mpioperator/kubectl-delivery:e2e",
		"-v=2",
	}, extraArgs...)})
}

// runOperator runs the binary under test as cfg says, in the repository,
// and makes it the current operator.
func runOperator(t *testing.T, cfg harness.OperatorConfig) *harness.Operator {
	t.Helper()
	cfg.Bin, cfg.Dir = env.operator, env.Root
	op, err := harness.StartOperator(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	currentOperator = op
	return op
}

// logLines returns the lines of the operator's log that contain any of
// the substrings, compared case-insensitively.
func logLines(op *harness.Operator, substrings ...string) []string {
	return op.Lines(func(line string) bool {
		low := strings.ToLower(line)
		for _, s := range substrings {
			if strings.Contains(low, strings.ToLower(s)) {
				return true
			}
		}
		return false
	})
}

// klogError matches the start of a klog line of severity error.
var klogError = regexp.MustCompile(`^E[0-9]{4} `)

// errorLines returns the log's lines of severity error.
func errorLines(op *harness.Operator) []string { return op.Lines(klogError.MatchString) }
