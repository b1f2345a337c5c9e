package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// kubectlTimeout bounds every kubectl command unless a caller says otherwise.
const kubectlTimeout = time.Minute

// pollInterval is the pause between two checks of a wait.
const pollInterval = 200 * time.Millisecond

// result is one finished kubectl command.
type result struct {
	args     []string
	stdout   string
	stderr   string
	code     int // exit code; -1 when it did not exit on its own
	err      error
	timedOut bool
	took     time.Duration
}

func (r *result) ok() bool { return r.err == nil && r.code == 0 }

// output is stdout and stderr together, for matching messages.
func (r *result) output() string { return r.stdout + r.stderr }

// String describes the command and what it did, for failure messages.
func (r *result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "command: %s\n", commandLine(env.Kubectl, r.args))
	switch {
	case r.timedOut:
		fmt.Fprintf(&b, "  timed out after %s\n", r.took.Round(time.Millisecond))
	case r.code >= 0:
		fmt.Fprintf(&b, "  exit code %d after %s\n", r.code, r.took.Round(time.Millisecond))
	default:
		fmt.Fprintf(&b, "  did not run: %v\n", r.err)
	}
	fmt.Fprintf(&b, "  stdout: %s\n", indentBlock(clip(r.stdout, 4000)))
	fmt.Fprintf(&b, "  stderr: %s", indentBlock(clip(r.stderr, 4000)))
	return b.String()
}

// commandLine renders a command so that it can be pasted into a shell.
func commandLine(name string, args []string) string {
	parts := make([]string, 0, len(args)+1)
	for _, a := range append([]string{name}, args...) {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#!~") {
			a = strconv.Quote(a)
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

func clip(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("... (%d more bytes)", len(s)-n)
}

func indentBlock(s string) string {
	if s == "" {
		return "(empty)"
	}
	if !strings.Contains(s, "\n") {
		return s
	}
	return "\n    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// kubectlWith runs the pinned kubectl against the admin kubeconfig (unless
// args name another one, which comes later and wins) with a time limit.
func kubectlWith(timeout time.Duration, args ...string) *result {
	full := append([]string{"--kubeconfig", env.Kubeconfig}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := env.KubectlCmd(ctx, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := &result{
		args:   full,
		stdout: stdout.String(),
		stderr: stderr.String(),
		code:   -1,
		err:    err,
		took:   time.Since(start),
	}
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		r.timedOut = true
	case err == nil:
		r.code = 0
	case errors.As(err, &exitErr):
		r.code = exitErr.ExitCode()
	}
	return r
}

// kubectl runs kubectl with the default time limit.
func kubectl(args ...string) *result { return kubectlWith(kubectlTimeout, args...) }

// mustKubectl runs kubectl and fails the test unless it succeeds; it returns
// stdout.
func mustKubectl(t *testing.T, args ...string) string {
	t.Helper()
	r := kubectl(args...)
	if !r.ok() {
		t.Fatalf("kubectl failed\n%s", r)
	}
	return r.stdout
}

// getJSON runs `kubectl get ARGS -o json` and decodes stdout into v.
func getJSON(args []string, v any) error {
	r := kubectl(append(append([]string{"get"}, args...), "-o", "json")...)
	if !r.ok() {
		return fmt.Errorf("kubectl failed\n%s", r)
	}
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		return fmt.Errorf("decoding the output of %s into %T: %w", commandLine("kubectl", r.args), v, err)
	}
	return nil
}

// mustGetJSON is getJSON that fails the test on an error.
func mustGetJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	if err := getJSON(args, v); err != nil {
		t.Fatal(err)
	}
}

// poll is how the tests wait; a wait ends early when the operator process
// has died, since nothing would change any more.
var poll = harness.Poller{Every: pollInterval, Abort: func() string {
	if op := currentOperator; op != nil && !op.Alive() {
		return "the operator exited (" + op.Status() + ")"
	}
	return ""
}}

// table is kubectl's default (human-readable) output split into cells.
type table struct {
	header []string
	rows   []map[string]string // column name -> cell, by row
}

// parseTable splits kubectl's aligned table output. Cells are cut at the
// columns' start positions in the header line, so an empty cell (an unset
// field) reads as "".
func parseTable(out string) (*table, error) {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) == "" {
		return nil, errors.New("no header line")
	}
	head := lines[0]
	var starts []int
	for i := 0; i < len(head); i++ {
		if head[i] != ' ' && (i == 0 || head[i-1] == ' ') {
			starts = append(starts, i)
		}
	}
	tb := &table{header: strings.Fields(head)}
	if len(starts) != len(tb.header) {
		return nil, fmt.Errorf("cannot find the columns of header %q", head)
	}
	for _, line := range lines[1:] {
		if strings.TrimSpace(line) == "" {
			continue
		}
		row := map[string]string{}
		for i, s := range starts {
			end := len(line)
			if i+1 < len(starts) && starts[i+1] < end {
				end = starts[i+1]
			}
			cell := ""
			if s < len(line) {
				cell = strings.TrimSpace(line[s:end])
			}
			row[tb.header[i]] = cell
		}
		tb.rows = append(tb.rows, row)
	}
	return tb, nil
}

// row returns the row whose NAME is name.
func (tb *table) row(name string) map[string]string {
	for _, r := range tb.rows {
		if r["NAME"] == name {
			return r
		}
	}
	return nil
}
