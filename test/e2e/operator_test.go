package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// operatorProc is the operator binary running as a child process.
type operatorProc struct {
	cmd     *exec.Cmd
	logPath string
	port    int // --monitoring-port; 0 when not served

	done     chan struct{} // closed once the process has exited
	mu       sync.Mutex
	waitErr  error
	exitCode int
}

// currentOperator is the running operator, if any; waits end early when it
// dies.
var currentOperator *operatorProc

// startOperator starts the operator with the given kubeconfig, logging to
// logPath. KUBECONFIG and KUBEFLOW_NAMESPACE are removed from its
// environment: the first would win over --kubeConfig, the second would
// narrow the namespaces it watches.
func startOperator(kubeconfig, logPath string, port int, extraArgs ...string) (*operatorProc, error) {
	args := []string{
		"--kubeConfig", kubeconfig,
		"--lock-namespace=mpi-operator",
		fmt.Sprintf("--monitoring-port=%d", port),
		"--kubectl-delivery-image=mpioperator/kubectl-delivery:e2e",
		"-v=2",
	}
	p, err := runOperator(logPath, append(args, extraArgs...), nil)
	if p != nil {
		p.port = port
	}
	return p, err
}

// runOperator starts the operator binary with exactly args, logging to
// logPath. Its environment is the test's without KUBECONFIG and
// KUBEFLOW_NAMESPACE, plus extraEnv (KEY=value).
func runOperator(logPath string, args, extraEnv []string) (*operatorProc, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(env.operator, args...)
	cmd.Dir = env.root
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "KUBECONFIG=") || strings.HasPrefix(kv, "KUBEFLOW_NAMESPACE=") {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", commandLine(env.operator, args), err)
	}
	_ = os.WriteFile(operatorPIDFile(), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644)
	p := &operatorProc{cmd: cmd, logPath: logPath, done: make(chan struct{}), exitCode: -1}
	go func() {
		err := cmd.Wait()
		logFile.Close()
		p.mu.Lock()
		p.waitErr = err
		p.exitCode = cmd.ProcessState.ExitCode()
		p.mu.Unlock()
		_ = os.Remove(operatorPIDFile())
		close(p.done)
	}()
	return p, nil
}

// exitState reports whether the process has exited, and how.
func (p *operatorProc) exitState() (bool, string) {
	select {
	case <-p.done:
	default:
		return false, "running"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return true, fmt.Sprintf("exit code %d (%v)", p.exitCode, p.waitErr)
}

// stop sends SIGTERM and waits up to timeout for the exit. It returns the
// exit code, or an error when the process did not exit in time (it is then
// killed).
func (p *operatorProc) stop(timeout time.Duration) (int, time.Duration, error) {
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return -1, 0, fmt.Errorf("sending SIGTERM: %w", err)
	}
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return -1, time.Since(start), fmt.Errorf("the operator did not exit within %s of SIGTERM; killed it", timeout)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitCode, time.Since(start), nil
}

// kill ends the process at once, if it still runs (cleanup after a failed
// test).
func (p *operatorProc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	if _, _, err := p.stop(10 * time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
	}
}

// logTail returns the last n lines of the operator's log.
func (p *operatorProc) logTail(n int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.logPath, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// logLines returns the lines of the operator's log that contain any of the
// substrings, compared case-insensitively.
func (p *operatorProc) logLines(substrings ...string) []string {
	return p.matchingLines(func(line string) bool {
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
func (p *operatorProc) errorLines() []string {
	return p.matchingLines(klogError.MatchString)
}

// matchingLines returns the lines of the operator's log that match; a log
// that cannot be read yields one line that says so.
func (p *operatorProc) matchingLines(match func(string) bool) []string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return []string{fmt.Sprintf("(cannot read %s: %v)", p.logPath, err)}
	}
	var found []string
	for _, line := range strings.Split(string(data), "\n") {
		if match(line) {
			found = append(found, line)
		}
	}
	return found
}

// get fetches a path of the monitoring endpoint.
func (p *operatorProc) get(path string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", p.port, path), nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// metric returns the value of an unlabelled sample in Prometheus text
// format, and whether it is there.
func metric(exposition, name string) (float64, bool) {
	for _, line := range strings.Split(exposition, "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) >= 2 && fields[0] == name {
			v, err := strconv.ParseFloat(fields[1], 64)
			return v, err == nil
		}
	}
	return 0, false
}

// freePort returns a TCP port that nothing listens on at the moment.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
