package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"

	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

// OperatorConfig is how to run an operator binary, v1's or v2's.
type OperatorConfig struct {
	Bin        string
	Kubeconfig string // also given as $KUBECONFIG, which the operator prefers
	LogPath    string // stdout and stderr, truncated at the start
	// Port is the monitoring port (/metrics, /healthz); 0 takes a free one
	// (FreePorts).
	Port int
	Args []string // more flags
	// ExactArgs: Args are the whole command line, as a manifest gives it:
	// neither --kubeConfig nor --monitoring-port is added, Kubeconfig goes
	// as $KUBECONFIG only when set, and Port is the one Args name (0: none,
	// and then StartOperator does not wait for /healthz).
	ExactArgs bool
	// Token, when set, is the bearer token of a scraper allowed to read the
	// monitoring port, which the process then serves over HTTPS
	// (--metrics-auth=kubernetes).
	Token string
	Env   []string // more environment variables, KEY=value
	Dir   string   // the working directory; "" is the caller's
	Logf  Logf     // nil logs nothing
}

// Operator is one run of the operator binary as a child process.
type Operator struct {
	Cmd     *exec.Cmd
	PID     int
	LogPath string
	Port    int
	Started time.Time
	token   string
	// done is closed when the process has exited; err is then its result.
	done chan struct{}
	err  error
	// logSizeAtStop is how much of the log was written before SIGTERM.
	logSizeAtStop int64
	stopped       bool
	killed        bool
}

// StartOperator runs the binary and returns once /healthz answers "ok"
// (at most 30 s). The process gets SIGTERM should the caller die first.
func StartOperator(ctx context.Context, cfg OperatorConfig) (*Operator, error) {
	port, args, env := cfg.Port, cfg.Args, Environ("KUBECONFIG", "KUBEFLOW_NAMESPACE")
	if !cfg.ExactArgs && port == 0 {
		ports, err := FreePorts(1)
		if err != nil {
			return nil, err
		}
		port = ports[0]
	}
	if !cfg.ExactArgs {
		args = append([]string{"--kubeConfig=" + cfg.Kubeconfig, fmt.Sprintf("--monitoring-port=%d", port)}, args...)
	}
	if cfg.Kubeconfig != "" {
		env = append(env, "KUBECONFIG="+cfg.Kubeconfig)
	}
	logFile, err := os.Create(cfg.LogPath)
	if err != nil {
		return nil, err
	}
	// Not CommandContext: the harness stops the operator itself.
	cmd := exec.Command(cfg.Bin, args...)
	cmd.Dir = cfg.Dir
	cmd.Env = append(env, cfg.Env...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// Its own process group: a Ctrl-C of the harness reaches the harness
	// only, which then stops the operator in order. Should the harness die
	// without stopping it, the kernel sends it SIGTERM.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", cfg.Bin, err)
	}
	op := &Operator{Cmd: cmd, PID: cmd.Process.Pid, LogPath: cfg.LogPath, Port: port, Started: time.Now(),
		token: cfg.Token, done: make(chan struct{})}
	go func() {
		op.err = cmd.Wait()
		logFile.Close()
		close(op.done)
	}()
	if cfg.Logf != nil {
		cfg.Logf("operator started: pid %d, %s%s %s, log %s", op.PID, strings.Join(append(slices.Clone(cfg.Env), ""), " "), cfg.Bin, strings.Join(args, " "), cfg.LogPath)
	}
	if port == 0 {
		return op, nil
	}
	err = Poller{}.Until(ctx, 30*time.Second, func() (bool, error) {
		if !op.Alive() {
			return false, fmt.Errorf("the operator exited at start (%w); log tail:\n%s", op.err, Tail(cfg.LogPath, 20))
		}
		body, err := op.Get(ctx, "/healthz")
		return err == nil && body == "ok", nil
	})
	if errors.Is(err, ErrTimeout) {
		err = fmt.Errorf("the operator's /healthz did not answer within 30 s; log tail:\n%s", Tail(cfg.LogPath, 20))
	}
	if err != nil {
		op.Stop()
		return nil, err
	}
	return op, nil
}

// Alive tells whether the process still runs.
func (op *Operator) Alive() bool {
	select {
	case <-op.done:
		return false
	default:
		return true
	}
}

// Done is closed once the process has exited.
func (op *Operator) Done() <-chan struct{} { return op.done }

// ExitErr is the process's result once Done is closed: nil for status 0.
func (op *Operator) ExitErr() error {
	<-op.done
	return op.err
}

// Killed tells whether the harness killed the process with Kill.
func (op *Operator) Killed() bool { return op.killed }

// DiedErr is non-nil once the operator has exited without being stopped
// or killed.
func (op *Operator) DiedErr() error {
	if op.Alive() || op.stopped {
		return nil
	}
	return fmt.Errorf("the operator (pid %d) exited: %w; log tail:\n%s", op.PID, op.err, Tail(op.LogPath, 30))
}

// Stop sends SIGTERM, waits up to 30 s, then kills the process.
func (op *Operator) Stop() {
	if op != nil && !op.stopped {
		op.Terminate(30 * time.Second)
	}
}

// Terminate sends SIGTERM and waits up to limit for the exit, after which
// it kills the process. It returns the exit code, -1 when killed, and how
// long the process took.
func (op *Operator) Terminate(limit time.Duration) (code int, took time.Duration) {
	start := time.Now()
	op.stopped = true
	if fi, err := os.Stat(op.LogPath); err == nil {
		op.logSizeAtStop = fi.Size()
	}
	if op.Alive() {
		_ = op.Cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-op.done:
		return op.Cmd.ProcessState.ExitCode(), time.Since(start)
	case <-time.After(limit):
		_ = op.Cmd.Process.Kill()
		<-op.done
		return -1, time.Since(start)
	}
}

// Status says whether the process runs, or how it exited.
func (op *Operator) Status() string {
	if op.Alive() {
		return "running"
	}
	return fmt.Sprintf("exit code %d (%v)", op.Cmd.ProcessState.ExitCode(), op.err)
}

// Kill sends SIGKILL and waits for the process to be gone. It returns
// false when the process had exited already.
func (op *Operator) Kill() bool {
	if !op.Alive() {
		return false
	}
	op.stopped, op.killed = true, true
	_ = op.Cmd.Process.Kill()
	<-op.done
	return true
}

// Get fetches a path of the monitoring port, failing unless it answers 200.
func (op *Operator) Get(ctx context.Context, path string) (string, error) {
	code, body, err := op.Fetch(ctx, path)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("GET %s: %d", path, code)
	}
	return body, err
}

// Fetch fetches a path of the monitoring port as a scraper would: over
// HTTPS with the token when the operator has one. It returns the status
// code and the body.
func (op *Operator) Fetch(ctx context.Context, path string) (int, string, error) {
	scheme := "http"
	if op.token != "" {
		scheme = "https"
	}
	return Scrape(ctx, fmt.Sprintf("%s://127.0.0.1:%d%s", scheme, op.Port, path), op.token)
}

// Lines are the lines of the log that match; a log that cannot be read
// yields one line that says so.
func (op *Operator) Lines(match func(line string) bool) []string {
	data, err := os.ReadFile(op.LogPath)
	if err != nil {
		return []string{fmt.Sprintf("(cannot read %s: %v)", op.LogPath, err)}
	}
	return slices.DeleteFunc(strings.Split(string(data), "\n"), func(line string) bool { return !match(line) })
}

// LogLine is one error or warning line of the operator's log, or a panic.
type LogLine struct {
	Severity string // "E", "F", "W", or "panic"
	// At is the line's klog time stamp (this year), or zero for a panic.
	At  time.Time
	Msg string // the text after the klog header
	// AfterStop: written after the harness sent SIGTERM.
	AfterStop bool
}

// LogSummary is what the operator's log says about problems.
type LogSummary struct {
	Errors, Warnings, Panics int
	// ShutdownErrors are error lines written after SIGTERM, not in Errors.
	ShutdownErrors int
	// Lines are every E, F and W line and every panic line.
	Lines []LogLine
}

var klogHeader = regexp.MustCompile(`^([EWIF])(\d{4} \d\d:\d\d:\d\d\.\d+)\s+\d+ [^\]]+\] `)

// ScanLog reads the operator's log: klog's E, F and W lines, and panics.
func (op *Operator) ScanLog() LogSummary {
	stopAt := int64(-1)
	if op.stopped && !op.killed {
		stopAt = op.logSizeAtStop
	}
	return scanLog(op.LogPath, op.Started.Year(), stopAt)
}

// ScanLogFile reads an operator log written in the given year, such as the
// log of a process that failed to start.
func ScanLogFile(path string, year int) LogSummary { return scanLog(path, year, -1) }

// scanLog reads a log; the lines from offset stopAt on (unless it is
// negative) were written after SIGTERM.
func scanLog(path string, year int, stopAt int64) LogSummary {
	var s LogSummary
	f, err := os.Open(path)
	if err != nil {
		return s
	}
	defer f.Close()
	var offset int64
	// block is the line whose multi-line value (klog writes `key=<`, the
	// value's lines indented by a tab, then ` >` and the other keys) is
	// being read, or -1.
	block := -1
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		afterStop := stopAt >= 0 && offset >= stopAt
		offset += int64(len(line)) + 1
		if block >= 0 {
			switch {
			case strings.HasPrefix(line, "\t"):
				s.Lines[block].Msg += " " + strings.TrimSpace(line)
				continue
			case strings.HasPrefix(line, " >"):
				s.Lines[block].Msg += " >" + strings.TrimPrefix(line, " >")
				block = -1
				continue
			}
			block = -1
		}
		if strings.HasPrefix(line, "panic:") || strings.Contains(line, "Observed a panic") {
			s.Panics++
			s.Lines = append(s.Lines, LogLine{Severity: "panic", Msg: line, AfterStop: afterStop})
		}
		m := klogHeader.FindStringSubmatch(line)
		if m == nil || m[1] == "I" {
			continue
		}
		switch {
		case m[1] == "W":
			if afterStop {
				continue
			}
			s.Warnings++
		case afterStop:
			s.ShutdownErrors++
		default:
			s.Errors++
		}
		at, _ := time.ParseInLocation("0102 15:04:05.999999", m[2], time.Local)
		s.Lines = append(s.Lines, LogLine{Severity: m[1], At: at.AddDate(year, 0, 0), Msg: line[len(m[0]):], AfterStop: afterStop})
		if strings.HasSuffix(line, "=<") {
			block = len(s.Lines) - 1
		}
	}
	return s
}

// Samples are up to n distinct error and warning messages written before
// the stop, shortened.
func (s LogSummary) Samples(n int) []string {
	var out []string
	seen := map[string]bool{}
	for _, l := range s.Lines {
		if l.Severity == "panic" || l.AfterStop || len(out) == n {
			continue
		}
		msg := l.Msg
		if len(msg) > 240 {
			msg = msg[:240] + "..."
		}
		key := msg
		if len(key) > 60 {
			key = key[:60]
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, l.Severity+": "+msg)
		}
	}
	return out
}

func (s LogSummary) String() string {
	out := fmt.Sprintf("%d errors, %d warnings, %d panics", s.Errors, s.Warnings, s.Panics)
	if s.ShutdownErrors > 0 {
		out += fmt.Sprintf(" (and %d error lines while stopping)", s.ShutdownErrors)
	}
	return out
}

// Tail returns the last n lines of a file.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
