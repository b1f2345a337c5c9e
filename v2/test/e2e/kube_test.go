package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// ---------------------------------------------------------------------------
// kubectl, as a user types it.

// kubectl runs the pinned kubectl with the admin kubeconfig (a later
// --kubeconfig in args wins) in the repository, so that paths are those
// the documentation gives. It returns stdout; the error carries the command and stderr.
func kubectl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := suite.KubectlCmd(ctx, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w\nstdout: %s\nstderr: %s",
			strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// must is kubectl that ends the test on a failure.
func must(t *testing.T, args ...string) string {
	t.Helper()
	out, err := kubectl(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// decode runs `kubectl get args -o json` into v.
func decode(v any, args ...string) error {
	out, err := kubectl(append(append([]string{"get"}, args...), "-o", "json")...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		return fmt.Errorf("decoding kubectl get %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// mustDecode is decode that ends the test on a failure.
func mustDecode(t *testing.T, v any, args ...string) {
	t.Helper()
	if err := decode(v, args...); err != nil {
		t.Fatal(err)
	}
}

// createYAML writes manifest to a file and creates its objects with a
// strict create, as a controller (or a user) would create them.
func createYAML(t *testing.T, manifest string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "objects.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	must(t, "create", "--validate=strict", "-f", path)
}

// ---------------------------------------------------------------------------
// Waiting.

// running is the operator under test, if one runs.
var running *harness.Operator

// poll is how the tests wait: every 250 ms, and a wait ends early when the
// operator has died, since nothing would change any more.
var poll = harness.Poller{Every: 250 * time.Millisecond, Abort: func() string {
	if running != nil && !running.Alive() {
		return "the operator exited (" + running.Status() + ")"
	}
	return ""
}}

// waitNamespace creates a namespace and waits for its default
// ServiceAccount, without which pods are refused.
func waitNamespace(t *testing.T, ns string) {
	t.Helper()
	must(t, "create", "namespace", ns)
	harness.Eventually(t, poll, 30*time.Second, "the default ServiceAccount of "+ns, func() (bool, string) {
		_, err := kubectl("get", "serviceaccount", "default", "-n", ns)
		return err == nil, fmt.Sprint(err)
	})
}

// waitCRD waits until the MPIJob CRD serves v2beta1 to kubectl.
func waitCRD(t *testing.T) {
	t.Helper()
	harness.Eventually(t, poll, time.Minute, "the API server to serve mpijobs.v2beta1.kubeflow.org", func() (bool, string) {
		out, err := kubectl("get", "crd", "mpijobs.kubeflow.org",
			"-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
		if err != nil || strings.TrimSpace(out) != "True" {
			return false, fmt.Sprintf("Established=%q %v", out, err)
		}
		_, err = kubectl("get", "mpijobs", "-A")
		return err == nil, fmt.Sprint(err)
	})
}

// ---------------------------------------------------------------------------
// The operator as a process.

// startOperatorProcess runs the binary with exactly args, KUBECONFIG set
// to kubeconfig when not empty, in the repository; it serves monitoring on
// monitoringPort, which args must name. The log goes to suite.Dir/logName.
func startOperatorProcess(t *testing.T, logName, kubeconfig string, args ...string) *harness.Operator {
	t.Helper()
	cfg := harness.OperatorConfig{Bin: suite.binary, Kubeconfig: kubeconfig, LogPath: filepath.Join(suite.Dir, logName),
		Args: args, ExactArgs: true, Port: monitoringPort, Dir: suite.Root}
	if slices.Contains(args, "--metrics-auth=kubernetes") {
		cfg.Token = scraperToken(t)
	}
	op, err := harness.StartOperator(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	running = op
	t.Logf("operator started: %s %s (pid %d, log %s)", suite.binary, strings.Join(args, " "), op.PID, op.LogPath)
	return op
}

// stopAtEnd stops the process when t ends, if it still runs, and shows
// the end of its log when t failed.
func stopAtEnd(t *testing.T, op *harness.Operator) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", op.LogPath, harness.Tail(op.LogPath, 40))
		}
		op.Terminate(10 * time.Second)
		if running == op {
			running = nil
		}
	})
}

// klogErrorLine matches a klog line of severity error or fatal.
var klogErrorLine = regexp.MustCompile(`^[EF]\d{4} `)

// problems are the log's error lines and any panic.
func problems(op *harness.Operator) []string {
	return op.Lines(func(line string) bool { return klogErrorLine.MatchString(line) || strings.Contains(line, "panic") })
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the
// ServiceAccount mpi-operator of ns, which the manifests bind to the
// operator's ClusterRole, and returns its path: the identity the operator
// has in its Deployment.
func serviceAccountKubeconfig(t *testing.T, ns string) string {
	t.Helper()
	token := strings.TrimSpace(must(t, "create", "token", "mpi-operator", "-n", ns, "--duration=2h"))
	path := filepath.Join(suite.Dir, "operator-"+ns+".kubeconfig")
	if err := os.WriteFile(path, []byte(must(t, "config", "view", "--raw", "--minify", "--flatten")), 0o600); err != nil {
		t.Fatal(err)
	}
	must(t, "--kubeconfig", path, "config", "set-credentials", "mpi-operator", "--token="+token)
	must(t, "--kubeconfig", path, "config", "set-context", "--current", "--user=mpi-operator")
	who := strings.TrimSpace(must(t, "--kubeconfig", path, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"))
	if want := "system:serviceaccount:" + ns + ":mpi-operator"; who != want {
		t.Fatalf("the operator's kubeconfig %s is %q, want %q", path, who, want)
	}
	return path
}

// waitLeader waits until the operator answers /healthz and leads.
func waitLeader(t *testing.T) {
	t.Helper()
	harness.Eventually(t, poll, time.Minute, "the operator to answer /healthz and lead", func() (bool, string) {
		code, body, err := running.Fetch(context.Background(), "/healthz")
		if err != nil || code != http.StatusOK || strings.TrimSpace(body) != "ok" {
			return false, fmt.Sprintf("/healthz %d %q %v", code, body, err)
		}
		_, body, err = running.Fetch(context.Background(), "/metrics")
		v, ok := harness.Metric(body, "mpi_operator_is_leader")
		return err == nil && ok && v == 1, fmt.Sprintf("mpi_operator_is_leader %v (present %v) %v", v, ok, err)
	})
}

// stopOperator sends SIGTERM and checks a clean exit within limit, and a
// log without errors.
func stopOperator(t *testing.T, p *harness.Operator, limit time.Duration) {
	t.Helper()
	code, took := p.Terminate(limit + 20*time.Second)
	t.Logf("the operator exited with code %d %s after SIGTERM", code, took.Round(time.Millisecond))
	if code != 0 || took > limit {
		t.Errorf("after SIGTERM the operator exited with code %d after %s, want 0 within %s", code, took, limit)
	}
	if lines := problems(p); len(lines) > 0 {
		t.Errorf("the log %s shows errors:\n%s", p.LogPath, strings.Join(lines, "\n"))
	}
}

// scraperToken is a token of the ServiceAccount default/metrics-scraper,
// bound to the manifests' ClusterRole mpi-operator-metrics-reader, as a
// Prometheus would be.
func scraperToken(t *testing.T) string {
	t.Helper()
	if _, err := kubectl("create", "serviceaccount", "metrics-scraper", "-n", "default"); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	if _, err := kubectl("create", "clusterrolebinding", "metrics-scraper", "--clusterrole=mpi-operator-metrics-reader",
		"--serviceaccount=default:metrics-scraper"); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	return strings.TrimSpace(must(t, "create", "token", "metrics-scraper", "-n", "default"))
}
