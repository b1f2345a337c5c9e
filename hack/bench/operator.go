package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// operator is one run of the operator binary as a child process.
type operator struct {
	cmd     *exec.Cmd
	pid     int
	logPath string
	port    int
	started time.Time
	// done is closed when the process has exited; err is then its result.
	done chan struct{}
	err  error
	// logSizeAtStop is how much of the log was written before SIGTERM.
	logSizeAtStop int64
	stopped       bool
}

// startOperator runs the binary with the operator's own kubeconfig (also as
// $KUBECONFIG, which the operator prefers to --kubeConfig), a monitoring
// port, and extra flags; it returns once /healthz answers.
func startOperator(ctx context.Context, o *options, kubeconfig, logPath string) (*operator, error) {
	bin, extra := o.operatorBin, o.operatorArgs
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	args := append([]string{"--kubeConfig=" + kubeconfig, fmt.Sprintf("--monitoring-port=%d", port)}, extra...)
	// Not CommandContext: the bench stops the operator itself, gracefully.
	cmd := exec.Command(bin, args...)
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "KUBECONFIG=") || strings.HasPrefix(kv, "KUBEFLOW_NAMESPACE=")
	})
	cmd.Env = append(append(env, o.operatorEnv...), "KUBECONFIG="+kubeconfig)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// Its own process group: a Ctrl-C of the bench reaches the bench
	// only, which then stops the operator in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	op := &operator{cmd: cmd, pid: cmd.Process.Pid, logPath: logPath, port: port, started: time.Now(), done: make(chan struct{})}
	go func() {
		op.err = cmd.Wait()
		logFile.Close()
		close(op.done)
	}()
	logf("operator started: pid %d, %s%s %s, log %s", op.pid, strings.Join(append(slices.Clone(o.operatorEnv), ""), " "), bin, strings.Join(args, " "), logPath)

	deadline := time.Now().Add(30 * time.Second)
	for {
		if !op.alive() {
			return nil, fmt.Errorf("the operator exited at start (%w); log tail:\n%s", op.err, tail(logPath, 20))
		}
		if body, err := op.get(ctx, "/healthz"); err == nil && body == "ok" {
			return op, nil
		}
		if time.Now().After(deadline) {
			op.stop()
			return nil, fmt.Errorf("the operator's /healthz did not answer within 30 s; log tail:\n%s", tail(logPath, 20))
		}
		select {
		case <-ctx.Done():
			op.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (op *operator) alive() bool {
	select {
	case <-op.done:
		return false
	default:
		return true
	}
}

// diedErr is non-nil once the operator has exited without being stopped.
func (op *operator) diedErr() error {
	if op.alive() || op.stopped {
		return nil
	}
	return fmt.Errorf("the operator (pid %d) exited: %w; log tail:\n%s", op.pid, op.err, tail(op.logPath, 30))
}

// stop sends SIGTERM, waits up to 30 s, then kills the process.
func (op *operator) stop() {
	if op == nil || op.stopped {
		return
	}
	op.stopped = true
	if fi, err := os.Stat(op.logPath); err == nil {
		op.logSizeAtStop = fi.Size()
	}
	if !op.alive() {
		return
	}
	_ = op.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-op.done:
	case <-time.After(30 * time.Second):
		logf("operator pid %d still running 30 s after SIGTERM: killing it", op.pid)
		_ = op.cmd.Process.Kill()
		<-op.done
	}
}

func (op *operator) get(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", op.port, path), nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return string(b), nil
}

// procMemory holds the memory lines of /proc/<pid>/status, in bytes.
type procMemory struct {
	HWM, RSS int64
}

// memory reads VmHWM (peak resident set) and VmRSS of the live process.
func (op *operator) memory() (procMemory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", op.pid))
	if err != nil {
		return procMemory{}, err
	}
	return parseProcStatus(string(b))
}

func parseProcStatus(s string) (procMemory, error) {
	var m procMemory
	found := 0
	for _, line := range strings.Split(s, "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok || (key != "VmHWM" && key != "VmRSS") {
			continue
		}
		fields := strings.Fields(val)
		if len(fields) != 2 || fields[1] != "kB" {
			return m, fmt.Errorf("unexpected %s line %q", key, line)
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return m, err
		}
		if key == "VmHWM" {
			m.HWM = kb << 10
		} else {
			m.RSS = kb << 10
		}
		found++
	}
	if found != 2 {
		return m, errors.New("no VmHWM/VmRSS in /proc/<pid>/status")
	}
	return m, nil
}

// cpu is the user plus system CPU time the process has used.
func (op *operator) cpu() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", op.pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	// Fields after the command name, which is in parentheses and may
	// contain anything.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc/<pid>/stat")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, errors.New("short /proc/<pid>/stat")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	// USER_HZ is 100 on every Linux the bench runs on.
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// histogram is a Prometheus histogram as the text format gives it.
type histogram struct {
	bounds []float64 // upper bounds, ascending, +Inf last
	counts []float64 // cumulative
	count  float64
}

var bucketRe = regexp.MustCompile(`^(\w+)_bucket\{le="([^"]+)"\} (\S+)$`)

// parseHistogram reads the histogram name from a /metrics text.
func parseHistogram(text, name string) (histogram, bool) {
	var h histogram
	for _, line := range strings.Split(text, "\n") {
		if m := bucketRe.FindStringSubmatch(line); m != nil && m[1] == name {
			le, err1 := strconv.ParseFloat(m[2], 64)
			v, err2 := strconv.ParseFloat(m[3], 64)
			if err1 != nil || err2 != nil {
				continue
			}
			h.bounds = append(h.bounds, le)
			h.counts = append(h.counts, v)
		} else if v, ok := strings.CutPrefix(line, name+"_count "); ok {
			h.count, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return h, len(h.bounds) > 0
}

// quantileBound is the upper bound of the bucket holding quantile q: the
// histogram says the quantile is at most that.
func (h histogram) quantileBound(q float64) float64 {
	if h.count == 0 {
		return 0
	}
	for i, c := range h.counts {
		if c >= q*h.count {
			return h.bounds[i]
		}
	}
	return h.bounds[len(h.bounds)-1]
}

// parseGauge reads an unlabelled sample from a /metrics text.
func parseGauge(text, name string) (float64, bool) {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// goMemory is the Go runtime's view of the operator's memory.
type goMemory struct {
	heapAlloc, heapInuse, nextGC, sys float64
	ok                                bool
}

func parseGoMemory(text string) goMemory {
	var g goMemory
	var ok [4]bool
	g.heapAlloc, ok[0] = parseGauge(text, "go_memstats_heap_alloc_bytes")
	g.heapInuse, ok[1] = parseGauge(text, "go_memstats_heap_inuse_bytes")
	g.nextGC, ok[2] = parseGauge(text, "go_memstats_next_gc_bytes")
	g.sys, ok[3] = parseGauge(text, "go_memstats_sys_bytes")
	g.ok = ok[0] && ok[1] && ok[2] && ok[3]
	return g
}

func (g goMemory) String() string {
	if !g.ok {
		return "not available"
	}
	return fmt.Sprintf("heap allocated %s, heap in use %s, next GC at %s, obtained from the OS %s",
		fmtMiB(int64(g.heapAlloc)), fmtMiB(int64(g.heapInuse)), fmtMiB(int64(g.nextGC)), fmtMiB(int64(g.sys)))
}

// goMemory scrapes the operator's Go memory statistics.
func (op *operator) goMemory(ctx context.Context) goMemory {
	text, err := op.get(ctx, "/metrics")
	if err != nil {
		return goMemory{}
	}
	return parseGoMemory(text)
}

func fmtBound(s float64) string {
	if s > 1e9 {
		return "> last bucket"
	}
	return "≤ " + fmtDur(time.Duration(s*float64(time.Second)))
}

// logSummary is what the operator's log says about problems.
type logSummary struct {
	errors, warnings, panics int
	// samples are a few distinct error and warning messages.
	samples []string
	// shutdownErrors are error lines written after SIGTERM.
	shutdownErrors int
}

var klogHeader = regexp.MustCompile(`^([EWIF])\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [^\]]+\] `)

// scanLog reads the operator's log: klog's E and W lines, and panics.
func (op *operator) scanLog() logSummary {
	var s logSummary
	f, err := os.Open(op.logPath)
	if err != nil {
		return s
	}
	defer f.Close()
	seen := map[string]bool{}
	var offset int64
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		afterStop := op.stopped && offset >= op.logSizeAtStop
		offset += int64(len(line)) + 1
		if strings.HasPrefix(line, "panic:") || strings.Contains(line, "Observed a panic") {
			s.panics++
		}
		m := klogHeader.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		switch m[1] {
		case "E", "F":
			if afterStop {
				s.shutdownErrors++
				continue
			}
			s.errors++
		case "W":
			if afterStop {
				continue
			}
			s.warnings++
		default:
			continue
		}
		msg := line[len(m[0]):]
		if len(msg) > 240 {
			msg = msg[:240] + "..."
		}
		key := msg
		if len(key) > 60 {
			key = key[:60]
		}
		if !seen[key] && len(s.samples) < 6 {
			seen[key] = true
			s.samples = append(s.samples, m[1]+": "+msg)
		}
	}
	return s
}

func (s logSummary) String() string {
	out := fmt.Sprintf("%d errors, %d warnings, %d panics", s.errors, s.warnings, s.panics)
	if s.shutdownErrors > 0 {
		out += fmt.Sprintf(" (and %d error lines while stopping)", s.shutdownErrors)
	}
	return out
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
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
