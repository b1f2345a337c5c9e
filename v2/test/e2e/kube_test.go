package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubeflow/mpi-operator/test/testcluster"
)

// ---------------------------------------------------------------------------
// kubectl, as a user types it.

// kubectl runs the pinned kubectl with the admin kubeconfig (a later
// --kubeconfig in args wins) in the repository, so that paths are the
// README's. It returns stdout; the error carries the command and stderr.
func kubectl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	full := append([]string{"--kubeconfig", suite.kubeconfig}, args...)
	cmd := exec.CommandContext(ctx, suite.kubectl, full...)
	cmd.Dir = suite.repo
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
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

// running is the operator under test, if one runs: a wait ends early when
// it has died, since nothing would change any more.
var running *operatorProcess

// waitUntil polls check every 250 ms until it is done, for at most
// timeout; seen says what check saw, for the progress and failure lines.
func waitUntil(t *testing.T, timeout time.Duration, what string, check func() (done bool, seen string)) {
	t.Helper()
	start := time.Now()
	report := start.Add(15 * time.Second)
	for {
		done, seen := check()
		switch {
		case done:
			t.Logf("%s: after %s", what, time.Since(start).Round(10*time.Millisecond))
			return
		case running != nil && running.exited():
			t.Fatalf("waiting for %s: the operator exited (%s); last seen: %s", what, running.status(), seen)
		case time.Since(start) > timeout:
			t.Fatalf("%s: not after %s; last seen:\n%s", what, timeout, seen)
		case time.Now().After(report):
			t.Logf("still waiting for %s (%s); seen: %s", what, time.Since(start).Round(time.Second), seen)
			report = report.Add(15 * time.Second)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitNamespace creates a namespace and waits for its default
// ServiceAccount, without which pods are refused.
func waitNamespace(t *testing.T, ns string) {
	t.Helper()
	must(t, "create", "namespace", ns)
	waitUntil(t, 30*time.Second, "the default ServiceAccount of "+ns, func() (bool, string) {
		_, err := kubectl("get", "serviceaccount", "default", "-n", ns)
		return err == nil, fmt.Sprint(err)
	})
}

// waitCRD waits until the MPIJob CRD serves v2beta1 to kubectl.
func waitCRD(t *testing.T) {
	t.Helper()
	waitUntil(t, time.Minute, "the API server to serve mpijobs.v2beta1.kubeflow.org", func() (bool, string) {
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

type operatorProcess struct {
	cmd     *exec.Cmd
	logPath string
	// token, when set, is what a scraper allowed to read /metrics sends,
	// over HTTPS: the process serves its monitoring port as the manifests
	// ask (--metrics-auth=kubernetes).
	token   string
	done    chan struct{} // closed when it has exited
	code    int
	waitErr error
}

// pidFile records the running operator, so that the next run stops one an
// interrupted run left.
func pidFile() string { return filepath.Join(suite.dir, "operator.pid") }

// startOperatorProcess runs the binary with exactly args, KUBECONFIG set to
// kubeconfig when not empty, and the rest of the test's environment but
// KUBECONFIG and KUBEFLOW_NAMESPACE. The log goes to suite.dir/logName.
func startOperatorProcess(t *testing.T, logName, kubeconfig string, args ...string) *operatorProcess {
	t.Helper()
	logPath := filepath.Join(suite.dir, logName)
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(suite.binary, args...)
	cmd.Dir = suite.repo
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "KUBECONFIG=") || strings.HasPrefix(kv, "KUBEFLOW_NAMESPACE=")
	})
	if kubeconfig != "" {
		cmd.Env = append(cmd.Env, "KUBECONFIG="+kubeconfig)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		t.Fatalf("starting %s %q: %v", suite.binary, args, err)
	}
	_ = os.WriteFile(pidFile(), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	p := &operatorProcess{cmd: cmd, logPath: logPath, done: make(chan struct{}), code: -1}
	if slices.Contains(args, "--metrics-auth=kubernetes") {
		p.token = scraperToken(t)
	}
	go func() {
		p.waitErr = cmd.Wait()
		p.code = cmd.ProcessState.ExitCode()
		log.Close()
		_ = os.Remove(pidFile())
		close(p.done)
	}()
	running = p
	t.Logf("operator started: %s %s (pid %d, log %s)", suite.binary, strings.Join(args, " "), cmd.Process.Pid, logPath)
	return p
}

// stopAtEnd stops the process when t ends, if it still runs, and shows
// the end of its log when t failed.
func (p *operatorProcess) stopAtEnd(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", p.logPath, p.tail(40))
		}
		p.terminate(10 * time.Second)
		if running == p {
			running = nil
		}
	})
}

func (p *operatorProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *operatorProcess) status() string {
	if !p.exited() {
		return "running"
	}
	return fmt.Sprintf("exit code %d, %v", p.code, p.waitErr)
}

// terminate sends SIGTERM and waits for the exit, at most limit, after
// which it kills the process. It returns the exit code and how long the
// process took; code -1 means it was killed.
func (p *operatorProcess) terminate(limit time.Duration) (code int, took time.Duration) {
	start := time.Now()
	if p.exited() {
		return p.code, 0
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.code, time.Since(start)
	case <-time.After(limit):
		_ = p.cmd.Process.Kill()
		<-p.done
		return -1, time.Since(start)
	}
}

// tail is the end of the log.
func (p *operatorProcess) tail(n int) string {
	data, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// klogErrorLine matches a klog line of severity error or fatal.
var klogErrorLine = regexp.MustCompile(`^[EF]\d{4} `)

// problems are the log's error lines and any panic.
func (p *operatorProcess) problems() []string {
	data, _ := os.ReadFile(p.logPath)
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if klogErrorLine.MatchString(line) || strings.Contains(line, "panic") {
			out = append(out, line)
		}
	}
	return out
}

// stopLeftOperator stops the operator that an interrupted run recorded,
// when the PID still names our binary.
func stopLeftOperator() {
	data, err := os.ReadFile(pidFile())
	if err != nil {
		return
	}
	_ = os.Remove(pidFile())
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return
	}
	ours := func() bool {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		return err == nil && exe == suite.binary
	}
	if !ours() {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 100 && ours(); i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if ours() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// monitoring fetches a path of the operator's monitoring endpoint: over
// HTTPS with the scraper's token when the running operator asks for one.
func monitoring(path string) (int, string, error) {
	scheme, token := "http", ""
	if running != nil && running.token != "" {
		scheme, token = "https", running.token
	}
	return testcluster.Scrape(fmt.Sprintf("%s://127.0.0.1:%d%s", scheme, monitoringPort, path), token)
}

// sample is the value of a metric's series whose name and labels, as
// written in the exposition, are series; ok is false when it is absent.
func sample(exposition, series string) (value float64, ok bool) {
	for _, line := range strings.Split(exposition, "\n") {
		if rest, found := strings.CutPrefix(line, series+" "); found {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the
// ServiceAccount mpi-operator of ns, which the manifests bind to the
// operator's ClusterRole, and returns its path: the identity the operator
// has in its Deployment.
func serviceAccountKubeconfig(t *testing.T, ns string) string {
	t.Helper()
	token := strings.TrimSpace(must(t, "create", "token", "mpi-operator", "-n", ns, "--duration=2h"))
	path := filepath.Join(suite.dir, "operator-"+ns+".kubeconfig")
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
	waitUntil(t, time.Minute, "the operator to answer /healthz and lead", func() (bool, string) {
		code, body, err := monitoring("/healthz")
		if err != nil || code != http.StatusOK || strings.TrimSpace(body) != "ok" {
			return false, fmt.Sprintf("/healthz %d %q %v", code, body, err)
		}
		_, body, err = monitoring("/metrics")
		v, ok := sample(body, "mpi_operator_is_leader")
		return err == nil && ok && v == 1, fmt.Sprintf("mpi_operator_is_leader %v (present %v) %v", v, ok, err)
	})
}

// stopOperator sends SIGTERM and checks a clean exit within limit, and a
// log without errors.
func stopOperator(t *testing.T, p *operatorProcess, limit time.Duration) {
	t.Helper()
	code, took := p.terminate(limit + 20*time.Second)
	t.Logf("the operator exited with code %d %s after SIGTERM", code, took.Round(time.Millisecond))
	if code != 0 || took > limit {
		t.Errorf("after SIGTERM the operator exited with code %d after %s, want 0 within %s", code, took, limit)
	}
	if lines := p.problems(); len(lines) > 0 {
		t.Errorf("the log %s shows errors:\n%s", p.logPath, strings.Join(lines, "\n"))
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
