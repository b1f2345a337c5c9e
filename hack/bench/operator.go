package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// startOperator runs the operator binary with the options' flags and
// environment and the operator's own kubeconfig, on a free monitoring port.
func startOperator(ctx context.Context, o *options, kubeconfig, logPath string) (*harness.Operator, error) {
	return harness.StartOperator(ctx, harness.OperatorConfig{
		Bin: o.operatorBin, Kubeconfig: kubeconfig, LogPath: logPath,
		Args: o.operatorArgs, Env: o.operatorEnv, Logf: logf,
	})
}

// procMemory holds the memory lines of /proc/<pid>/status, in bytes.
type procMemory struct {
	HWM, RSS int64
}

// memoryOf reads VmHWM (peak resident set) and VmRSS of the live process.
func memoryOf(op *harness.Operator) (procMemory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", op.PID))
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

// cpuOf is the user plus system CPU time the operator has used.
func cpuOf(op *harness.Operator) (time.Duration, error) { return procCPU(op.PID) }

// procCPU is the user plus system CPU time a process has used.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseProcStat(string(b))
}

// parseProcStat reads utime + stime from the text of /proc/<pid>/stat.
func parseProcStat(s string) (time.Duration, error) {
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

// syncCount is the operator's count of syncs, summed over its queues (the
// count of the mpi_operator_sync_duration_seconds histogram).
func syncCount(text string) (float64, bool) {
	const name = "mpi_operator_sync_duration_seconds_count"
	var n float64
	found := false
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		n += v
		found = true
	}
	return n, found
}

// operatorQPS is the --kube-api-qps the operator runs with: the last one
// of its extra flags, or else its default as the binary's --help states
// it (defaults as binaryDefaults prints them). Pod creations have a client
// of their own with this rate limit.
func operatorQPS(args []string, defaults string) (float64, bool) {
	qps, found := 0.0, false
	set := func(v string) {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			qps, found = f, true
		}
	}
	for i, a := range args {
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name != "kube-api-qps" || !strings.HasPrefix(a, "-") {
			continue
		}
		if hasVal {
			set(val)
		} else if i+1 < len(args) {
			set(args[i+1])
		}
	}
	if found {
		return qps, true
	}
	for _, f := range strings.Fields(defaults) {
		if v, ok := strings.CutPrefix(f, "--kube-api-qps="); ok {
			set(v)
		}
	}
	return qps, found
}

// cpuWindow is the CPU time the operator and the control plane's
// processes used in a window of a scenario.
type cpuWindow struct {
	from, to time.Time
	// operator, apiserver, etcd: CPU time used in the window; ok is
	// false when a process could not be read (the control plane's: on a
	// cluster the bench did not start).
	operator, apiserver, etcd                time.Duration
	operatorOK, apiserverOK, etcdOK          bool
	startOperator, startAPIServer, startEtcd time.Duration
	apiserverPID, etcdPID                    int
	// load is the machine's load average at the end of the window.
	load string
	// machine: the share of the machine's CPU time (all cores) that was
	// busy in the window, from /proc/stat; machineOK is false when it
	// could not be read.
	machine                float64
	machineOK              bool
	startBusy, startAllCPU uint64
}

// machineCPU reads the machine's busy and total CPU time (in clock ticks,
// all cores) from the first line of /proc/stat.
func machineCPU() (busy, total uint64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	return parseMachineStat(string(b))
}

// parseMachineStat reads "cpu  user nice system idle iowait irq softirq
// steal ...": idle and iowait are the idle time, the rest is busy.
func parseMachineStat(stat string) (busy, total uint64, err error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("no cpu line in /proc/stat: %q", line)
	}
	var idle uint64
	for i, v := range f[1:] {
		if i >= 8 { // guest time is counted in user already
			break
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %w", err)
		}
		total += n
		if i == 3 || i == 4 {
			idle += n
		}
	}
	return total - idle, total, nil
}

func (w *cpuWindow) begin(op *harness.Operator, cl *cluster) {
	w.from = time.Now()
	w.apiserverPID, w.etcdPID = cl.componentPID("kube-apiserver"), cl.componentPID("etcd")
	var err error
	w.startOperator, err = cpuOf(op)
	w.operatorOK = err == nil
	if w.apiserverPID > 0 {
		w.startAPIServer, err = procCPU(w.apiserverPID)
		w.apiserverOK = err == nil
	}
	if w.etcdPID > 0 {
		w.startEtcd, err = procCPU(w.etcdPID)
		w.etcdOK = err == nil
	}
	w.startBusy, w.startAllCPU, err = machineCPU()
	w.machineOK = err == nil
}

func (w *cpuWindow) end(op *harness.Operator) {
	w.to = time.Now()
	w.load = harness.LoadAverage()
	read := func(pid int, start time.Duration, ok *bool, into *time.Duration) {
		if !*ok {
			return
		}
		v, err := procCPU(pid)
		if err != nil {
			*ok = false
			return
		}
		*into = v - start
	}
	read(op.PID, w.startOperator, &w.operatorOK, &w.operator)
	read(w.apiserverPID, w.startAPIServer, &w.apiserverOK, &w.apiserver)
	read(w.etcdPID, w.startEtcd, &w.etcdOK, &w.etcd)
	if w.machineOK {
		busy, total, err := machineCPU()
		if err != nil || total <= w.startAllCPU {
			w.machineOK = false
			return
		}
		w.machine = float64(busy-w.startBusy) / float64(total-w.startAllCPU)
	}
}

// String is "operator 3.20 s, kube-apiserver 10.1 s, etcd 2.00 s of CPU in
// 40 s; the machine's CPU 80% busy (2 cores) (load average at the end 1.9,
// 1.2, 0.8)".
func (w cpuWindow) String() string {
	if w.to.IsZero() {
		return "not measured"
	}
	cell := func(name string, d time.Duration, ok bool) string {
		if !ok {
			return name + " not measured"
		}
		return fmt.Sprintf("%s %.2f s", name, d.Seconds())
	}
	machine := "the machine's CPU not measured"
	if w.machineOK {
		machine = fmt.Sprintf("the machine's CPU %.0f%% busy (%d cores)", 100*w.machine, runtime.NumCPU())
	}
	return fmt.Sprintf("%s, %s, %s of CPU in %s; %s (load average at the end %s)",
		cell("operator", w.operator, w.operatorOK), cell("kube-apiserver", w.apiserver, w.apiserverOK),
		cell("etcd", w.etcd, w.etcdOK), harness.FmtDur(w.to.Sub(w.from)), machine, w.load)
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

// goMemoryOf scrapes the operator's Go memory statistics.
func goMemoryOf(ctx context.Context, op *harness.Operator) goMemory {
	text, err := op.Get(ctx, "/metrics")
	if err != nil {
		return goMemory{}
	}
	return parseGoMemory(text)
}

func fmtBound(s float64) string {
	if s > 1e9 {
		return "> last bucket"
	}
	return "≤ " + harness.FmtDur(time.Duration(s*float64(time.Second)))
}
