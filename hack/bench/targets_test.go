package main

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"

	"github.com/kubeflow/mpi-operator/test/harness"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(*options) bool
	}{
		{name: "defaults", check: func(o *options) bool {
			return slices.Equal(o.scenarios, []string{"latency", "load", "bigjob", "memory"}) &&
				o.loadJobs == 200 && o.loadResizes == 400 && o.loadRate == 16 &&
				o.bigWorkers == min(5000, int(kubeflow.MaxWorkers)) && o.bigStep == 1000 && o.bigTimeout == 10*time.Minute
		}},
		{name: "scenarios deduplicated", args: []string{"--scenarios", "memory, latency,memory"}, check: func(o *options) bool {
			return slices.Equal(o.scenarios, []string{"memory", "latency"})
		}},
		{name: "load sizes", args: []string{"--load-jobs=20", "--load-resizes=40", "--load-rate=2.5"}, check: func(o *options) bool {
			p := o.loadParams()
			return p.jobs == 20 && p.resizes == 40 && p.rate == 2.5 && p.namespace == loadNamespace && !p.upstream
		}},
		{name: "big sizes", args: []string{"--big-workers=300", "--big-step=100", "--big-timeout=2m"}, check: func(o *options) bool {
			return o.bigWorkers == 300 && o.bigStep == 100 && o.bigTimeout == 2*time.Minute &&
				o.bigMaxReplicas() == 300
		}},
		{name: "big job beyond the most workers of a job", args: []string{fmt.Sprintf("--big-workers=%d", kubeflow.MaxWorkers+1), "--big-step=1"},
			wantErr: "--big-workers <="},
		{name: "big step as large as the job", args: []string{"--big-workers=300", "--big-step=300"}, wantErr: "--big-step <"},
		{name: "unknown scenario", args: []string{"--scenarios", "latency,speed"}, wantErr: `unknown scenario "speed"`},
		{name: "no scenario", args: []string{"--scenarios", ","}, wantErr: "names no scenario"},
		{name: "no load jobs", args: []string{"--load-jobs=0"}, wantErr: "--load-jobs"},
		{name: "zero load rate", args: []string{"--load-rate=0"}, wantErr: "--load-rate"},
		{name: "no big workers", args: []string{"--big-workers=0"}, wantErr: "--big-workers"},
		{name: "no big step", args: []string{"--big-step=0"}, wantErr: "--big-step"},
		{name: "no big timeout", args: []string{"--big-timeout=0s"}, wantErr: "--big-timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseFlags(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(o) {
				t.Errorf("options %+v", o)
			}
		})
	}
}

func TestClusterCapacity(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	nodes, perNode := clusterCapacity(o)
	// latency 50 x 7, load 200 x 7, bigjob, memory 10,100; 10% spare.
	want := (50*7 + 200*7 + o.bigWorkers + 1 + 10100) * 11 / 10
	if nodes*perNode < want || nodes*perNode >= want+perNode {
		t.Errorf("%d nodes x %d pods for %d pods", nodes, perNode, want)
	}
	o.scenarios = []string{scenarioBigJob}
	if nodes, perNode := clusterCapacity(o); nodes*perNode < o.bigWorkers+1 {
		t.Errorf("bigjob alone: %d nodes x %d pods", nodes, perNode)
	}
}

func TestOperatorQPS(t *testing.T) {
	defaults := "--kube-api-qps=200 --kube-api-burst=400 --threadiness=2"
	tests := []struct {
		args     []string
		defaults string
		want     float64
		ok       bool
	}{
		{nil, defaults, 200, true},
		{[]string{"--kube-api-qps=5"}, defaults, 5, true},
		{[]string{"-kube-api-qps=7.5"}, defaults, 7.5, true},
		{[]string{"--kube-api-qps", "50"}, defaults, 50, true},
		{[]string{"--kube-api-qps=5", "--threadiness=4", "--kube-api-qps=9"}, defaults, 9, true},
		{[]string{"--kube-api-burst=9"}, defaults, 200, true},
		{nil, "unknown (exec failed)", 0, false},
	}
	for _, tt := range tests {
		got, ok := operatorQPS(tt.args, tt.defaults)
		if got != tt.want || ok != tt.ok {
			t.Errorf("operatorQPS(%q, %q) = %v, %v; want %v, %v", tt.args, tt.defaults, got, ok, tt.want, tt.ok)
		}
	}
}

func TestSyncCount(t *testing.T) {
	tests := []struct {
		text string
		want float64
		ok   bool
	}{
		{`# TYPE mpi_operator_sync_duration_seconds histogram
mpi_operator_sync_duration_seconds_bucket{queue="main",le="0.001"} 3
mpi_operator_sync_duration_seconds_sum{queue="main"} 0.5
mpi_operator_sync_duration_seconds_count{queue="main"} 120
mpi_operator_sync_duration_seconds_count{queue="urgent"} 30
mpi_operator_sync_duration_seconds_counter_other 7
`, 150, true},
		{"mpi_operator_sync_duration_seconds_count 4\n", 4, true},
		{"go_goroutines 12\n", 0, false},
	}
	for _, tt := range tests {
		if got, ok := syncCount(tt.text); got != tt.want || ok != tt.ok {
			t.Errorf("syncCount = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
		}
	}
}

func TestParseProcStat(t *testing.T) {
	tests := []struct {
		stat    string
		want    time.Duration
		wantErr bool
	}{
		// utime 250 and stime 50 ticks of 10 ms.
		{"1234 (mpi-operator) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 100 0 0", 3 * time.Second, false},
		// A command name with spaces and parentheses.
		{"77 (a (b) c) R 1 77 77 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 5 0 0", 30 * time.Millisecond, false},
		{"77 (short) R 1 2", 0, true},
		{"no parenthesis", 0, true},
	}
	for _, tt := range tests {
		got, err := parseProcStat(tt.stat)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseProcStat(%q) = %v, %v; want %v (error %v)", tt.stat, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestStepArithmetic(t *testing.T) {
	var w objWrites
	for _, n := range []int{100, 300, 200} {
		w.add(n)
	}
	if w.versions != 3 || w.bytes != 600 || w.last != 200 || w.most != 300 {
		t.Errorf("writes %+v", w)
	}
	s := &bigStep{from: 6000, to: 5000, cpu: 2 * time.Second, cpuOK: true, syncs: 40, syncsOK: true}
	if s.changed() != 1000 || s.perWorker(float64(s.cpu)) != float64(2*time.Millisecond) {
		t.Errorf("changed %d, per worker %v", s.changed(), s.perWorker(float64(s.cpu)))
	}
	if d, ok := s.cpuPerSync(); !ok || d != 50*time.Millisecond {
		t.Errorf("CPU per sync %v, %v", d, ok)
	}
	s.syncs = 0
	if _, ok := s.cpuPerSync(); ok {
		t.Error("CPU per sync without syncs")
	}
	if (&bigStep{from: 3, to: 3}).perWorker(5) != 0 {
		t.Error("per worker of a step that changed none")
	}
}

func TestCPUWindowString(t *testing.T) {
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := cpuWindow{from: from, to: from.Add(40 * time.Second), operator: 3200 * time.Millisecond, operatorOK: true,
		apiserver: 10 * time.Second, apiserverOK: true, load: "1.90, 1.20, 0.80", machine: 0.874, machineOK: true}
	want := fmt.Sprintf("operator 3.20 s, kube-apiserver 10.00 s, etcd not measured of CPU in 40.00 s; the machine's CPU 87%% busy (%d cores) (load average at the end 1.90, 1.20, 0.80)", runtime.NumCPU())
	if got := w.String(); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if got := (cpuWindow{}).String(); got != "not measured" {
		t.Errorf("empty window %q", got)
	}
}

// bigSteps builds a big job's result from each step's workers, CPU time
// and ConfigMap bytes.
func bigSteps(create, grow, shrink [3]int64, settled bool) *bigResult {
	b := &bigResult{}
	at := time.Now()
	for i, st := range [][3]int64{create, grow, shrink} {
		s := &bigStep{name: []string{"create", "grow", "shrink"}[i], cpu: time.Duration(st[1]) * time.Millisecond, cpuOK: true, start: at}
		switch i {
		case 0:
			s.from, s.to = 0, int(st[0])
		case 1:
			s.from, s.to = int(create[0]), int(create[0]+st[0])
		case 2:
			s.from, s.to = int(create[0]+grow[0]), int(create[0]+grow[0]-st[0])
		}
		s.configMap.bytes = st[2]
		if settled || i < 2 {
			s.settledAt = at.Add(time.Second)
		}
		b.steps = append(b.steps, s)
	}
	if !settled {
		b.unsettled = []string{"shrink"}
	}
	return b
}

func TestStepRatios(t *testing.T) {
	tests := []struct {
		name              string
		b                 *bigResult
		cpuGrow, cpuShr   float64
		ok                bool
		wantCPU, wantCMet string
	}{
		{
			name: "linear",
			// 5000 workers for 5 s, 1000 for 1 s: 1 ms a worker each.
			b:       bigSteps([3]int64{5000, 5000, 5_000_000}, [3]int64{1000, 1000, 1_000_000}, [3]int64{1000, 1200, 900_000}, true),
			cpuGrow: 1, cpuShr: 1.2, ok: true, wantCPU: metYes, wantCMet: metYes,
		},
		{
			name: "quadratic growth",
			// The growth rewrites the whole list for every worker.
			b:       bigSteps([3]int64{5000, 5000, 5_000_000}, [3]int64{1000, 6000, 300_000_000}, [3]int64{1000, 1000, 1_000_000}, true),
			cpuGrow: 6, cpuShr: 1, ok: true, wantCPU: metNo, wantCMet: metNo,
		},
		{
			name: "unsettled",
			b:    bigSteps([3]int64{5000, 5000, 5_000_000}, [3]int64{1000, 1000, 1_000_000}, [3]int64{1000, 1000, 1_000_000}, false),
			ok:   false, wantCPU: metNo, wantCMet: metNo,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, s, ok := stepRatios(tt.b, stepCPU)
			if ok != tt.ok || (ok && (!near(g, tt.cpuGrow) || !near(s, tt.cpuShr))) {
				t.Errorf("CPU ratios %v, %v, %v; want %v, %v, %v", g, s, ok, tt.cpuGrow, tt.cpuShr, tt.ok)
			}
			r := &report{o: &options{bigWorkers: 5000, bigStep: 1000}, bigjob: tt.b}
			rows := r.bigJobTargets()
			if len(rows) != 2 || rows[0].met != tt.wantCPU || rows[1].met != tt.wantCMet {
				t.Errorf("rows %+v", rows)
			}
		})
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func TestStartFigures(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	created := map[string]time.Time{"a": t0, "b": t0.Add(time.Second), "c": t0.Add(2 * time.Second)}
	running := map[string]time.Time{"a": t0.Add(time.Second), "b": t0.Add(3 * time.Second)}
	listed := map[string]time.Time{"a": t0.Add(4 * time.Second)}
	f := newStartFigures(created, running, listed)
	if f.created != 3 || !f.firstCreated.Equal(t0) || !f.lastCreated.Equal(t0.Add(2*time.Second)) ||
		!f.lastRunning.Equal(t0.Add(3*time.Second)) || !f.lastListed.Equal(t0.Add(4*time.Second)) {
		t.Errorf("figures %+v", f)
	}
	if rate, ok := f.creationRate(); !ok || rate != 1 {
		t.Errorf("rate %v, %v", rate, ok)
	}
	if _, ok := newStartFigures(map[string]time.Time{"a": t0}, nil, nil).creationRate(); ok {
		t.Error("a rate from one creation")
	}
}

// memoryRun is a memory scenario's result: pods created over createFor,
// the last Running at floor and the last listed at listed after the
// start, with the given Running -> listed times and peaks.
func memoryRun(pods int, createFor, floor, listed time.Duration, discovery harness.Sample, hwm, restartHWM int64) *memoryResult {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return &memoryResult{
		pods: pods, jobs: pods / 100, perJob: 100, created: pods, running: pods, listed: pods, complete: true, start: t0,
		discovery: discovery,
		watched: startFigures{created: pods, firstCreated: t0, lastCreated: t0.Add(createFor),
			lastRunning: t0.Add(floor), lastListed: t0.Add(listed), running: pods, listed: pods},
		mem: procMemory{HWM: hwm}, restarted: true, restartMem: procMemory{HWM: restartHWM},
	}
}

func latencyRun(discovery, shrink harness.Sample, audit []auditEvent, resizes, hostChanges int) *latencyResult {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := &latencyResult{discovery: discovery, shrink: shrink, audit: audit, hostChanges: hostChanges,
		start: t0.Add(-time.Minute), allListed: t0.Add(-time.Second), resizesStart: t0, settled: t0.Add(time.Minute)}
	for range resizes {
		l.resizes = append(l.resizes, &resizeRec{})
	}
	return l
}

// audits returns n audit events of verb on resource (with a subresource
// after a slash) named name, inside the resizes' window of latencyRun.
func audits(n int, verb, resource, name string) []auditEvent {
	var out []auditEvent
	for range n {
		e := auditEvent{Verb: verb, RequestReceivedTimestamp: time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC)}
		res, sub, _ := strings.Cut(resource, "/")
		e.ObjectRef = &struct {
			Resource    string `json:"resource"`
			Subresource string `json:"subresource"`
			Namespace   string `json:"namespace"`
			Name        string `json:"name"`
			APIGroup    string `json:"apiGroup"`
		}{Resource: res, Subresource: sub, Name: name}
		out = append(out, e)
	}
	return out
}

func ms(v ...int) harness.Sample {
	var s harness.Sample
	for _, x := range v {
		s = append(s, time.Duration(x)*time.Millisecond)
	}
	return s
}

func TestTargets(t *testing.T) {
	const mib = 1 << 20
	fast := ms(10, 20, 30, 90)
	slow := ms(10, 20, 30, 400)
	good := &report{
		o:                &options{loadJobs: 200, loadResizes: 400, loadRate: 16, bigWorkers: 5000, bigStep: 1000},
		operatorDefaults: "--kube-api-qps=200 --kube-api-burst=400",
		// 10,000 pods in 52 s: 192 pods/s, 96% of 200.
		memory: memoryRun(10000, 52*time.Second, 60*time.Second, 60500*time.Millisecond, fast, 60*mib, 50*mib),
		load:   latencyRun(fast, fast, nil, 400, 0),
		latency: latencyRun(fast, fast, slices.Concat(
			audits(600, "create", "pods", "j-worker-1"),
			audits(90, "create", "events", "e"), audits(10, "patch", "events", "e"),
			audits(95, "update", "mpijobs/status", "j"),
			audits(40, "patch", "pods", "j-launcher"),
			audits(30, "update", "leases", "mpi-operator"),
		), 100, 60),
		bigjob: bigSteps([3]int64{5000, 5000, 5_000_000}, [3]int64{1000, 1000, 1_000_000}, [3]int64{1000, 1000, 1_000_000}, true),
	}
	wantGood := []string{metYes, metYes, metYes, metNA, metYes, metYes, metNA, metYes, metYes, metYes, metYes, metYes, metYes, metYes}

	bad := &report{
		o:                &options{loadJobs: 200, loadResizes: 400, loadRate: 16, bigWorkers: 5000, bigStep: 1000, operatorArgs: []string{"--kube-api-qps=400"}},
		operatorDefaults: "--kube-api-qps=200",
		// 192 pods/s is 48% of 400; the last listing 3 s after the floor.
		memory: memoryRun(10000, 52*time.Second, 60*time.Second, 63*time.Second, slow, 70*mib, 50*mib),
		load:   latencyRun(slow, slow, nil, 400, 0),
		latency: latencyRun(fast, fast, slices.Concat(
			audits(1000, "create", "pods", "j-worker-1"),
			audits(150, "create", "events", "e"),
			audits(210, "update", "mpijobs/status", "j"),
			audits(70, "patch", "pods", "j-launcher"),
		), 100, 60),
		bigjob: bigSteps([3]int64{5000, 5000, 5_000_000}, [3]int64{1000, 4000, 1_000_000}, [3]int64{1000, 1000, 9_000_000}, true),
	}
	wantBad := []string{metNo, metNo, metNo, metNA, metNo, metNo, metNA, metNo, metNo, metNo, metNo, metNo, metNo, metNo}

	none := &report{o: &options{loadJobs: 200, loadResizes: 400, loadRate: 16, bigWorkers: 5000, bigStep: 1000}}
	wantNone := slices.Repeat([]string{metNA}, 14)

	limited := &report{
		o:                &options{operatorEnv: []string{"GOMEMLIMIT=64MiB"}},
		operatorDefaults: "--kube-api-qps=200",
		memory:           memoryRun(10000, 52*time.Second, 60*time.Second, 60500*time.Millisecond, fast, 60*mib, 50*mib),
		latency:          latencyRun(fast, fast, nil, 100, 0), // no audit log
	}
	wantLimited := []string{metYes, metYes, metYes, metNA, metNA, metNA, metNA, metNA, metNA, metNA, metNA, metNA, metNA, metNA}

	small := &report{
		o:                &options{},
		operatorDefaults: "--kube-api-qps=200",
		memory:           memoryRun(1000, 5*time.Second, 6*time.Second, 6*time.Second, fast, 30*mib, 30*mib),
	}

	for _, tt := range []struct {
		name string
		r    *report
		want []string
	}{
		{"all met", good, wantGood},
		{"none met", bad, wantBad},
		{"nothing run", none, wantNone},
		{"with GOMEMLIMIT, no audit log", limited, wantLimited},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rows := tt.r.targets()
			var got []string
			for _, row := range rows {
				got = append(got, row.met)
			}
			if !slices.Equal(got, tt.want) {
				for i, row := range rows {
					t.Logf("%d: %s | %s | %s", i, row.target, row.measured, row.met)
				}
				t.Errorf("met %v\nwant %v", got, tt.want)
			}
		})
	}
	if row := small.rssTarget(); row.met != metNA || !strings.Contains(row.measured, "1000 worker pods") {
		t.Errorf("RSS with 1,000 pods: %+v", row)
	}
	// The report begins with the Targets table.
	text := good.String()
	if !strings.Contains(text, "### Targets\n\n| target | measured | met |") ||
		strings.Index(text, "### Targets") > strings.Index(text, "### Latency") {
		t.Errorf("report:\n%s", text)
	}
}

func TestFmtThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 10000: "10,000", 1234567: "1,234,567", -5000: "-5,000"} {
		if got := fmtThousands(n); got != want {
			t.Errorf("fmtThousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseMachineStat(t *testing.T) {
	busy, total, err := parseMachineStat("cpu  100 5 50 800 20 3 2 1 7 0\ncpu0 50 2 25 400 10 1 1 0 0 0\n")
	// user nice system idle iowait irq softirq steal; guest is in user.
	if err != nil || busy != 161 || total != 981 {
		t.Errorf("busy %d, total %d, %v; want 161, 981", busy, total, err)
	}
	if _, _, err := parseMachineStat("intr 1 2 3\n"); err == nil {
		t.Error("no error without a cpu line")
	}
}
