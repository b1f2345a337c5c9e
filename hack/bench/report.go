package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// The figures of upstream v0.3.0 measured with the same scenario on the
// same kind of control plane (50 jobs x 2 workers, 100 resizes at 4/s,
// --kube-api-qps 5 --kube-api-burst 10); see the project's notes.
const (
	upRole       = "29 s / 49 s"
	upPods       = "30 s / 51 s"
	upDiscovery  = "35 s / 77 s"
	upShrink     = "63 s / 76 s"
	upAllListed  = "93 s"
	upDeleted    = "78 of 78 shrink victims"
	upUnsettled  = "11 of 100 after 3 min"
	upRSS        = "41 MiB"
	upRSS10k     = "189 MiB (10,000 worker pods, 50 kwok nodes)"
	upLeader     = "20 requests a minute (Endpoints lock)"
	targetRSS10k = targetRSS10kNoLimit
)

type report struct {
	harness.RunInfo
	o                *options
	operatorDefaults string // the binary's defaults of its load-shaping flags
	cluster          string
	latency          *latencyResult
	load             *latencyResult
	bigjob           *bigResult
	memory           *memoryResult
}

func summaryRow(t *harness.Table, name string, s harness.Sample, upstream string) {
	sum := s.Summarize()
	if sum.N == 0 {
		t.Add(name, "-", "-", "-", "0", upstream)
		return
	}
	t.Add(name, harness.FmtDur(sum.P50), harness.FmtDur(sum.P99), harness.FmtDur(sum.Max), fmt.Sprint(sum.N), upstream)
}

// up is an upstream figure for the table, which only the v1 operator has:
// upstream v0.8.0, the v2beta1 operator, cannot be built here (its module
// is not served by the Go module proxy).
func (r *report) up(figure string) string {
	if r.o.api != harness.V1 {
		return ""
	}
	return figure
}

// upOf is up for a run of the latency scenario's code: upstream's figure
// only when it was measured at that run's sizes.
func (r *report) upOf(l *latencyResult, figure string) string {
	if !l.p.upstream {
		if r.o.api == harness.V1 && figure != "" {
			return "not measured"
		}
		return ""
	}
	return r.up(figure)
}

func (r *report) upColumn(what string) string {
	if r.o.api != harness.V1 {
		return "upstream"
	}
	return "upstream v0.3.0" + what
}

func (r *report) operatorFlags() string {
	s := strings.Join(r.o.operatorArgs, " ")
	if len(r.o.operatorArgs) == 0 {
		s = "the operator's defaults (" + r.operatorDefaults + ")"
	}
	if len(r.o.operatorEnv) > 0 {
		s += "; environment " + strings.Join(r.o.operatorEnv, " ")
	}
	return s
}

func (r *report) String() string {
	var b strings.Builder
	o := r.o
	fmt.Fprintf(&b, "## mpi-operator bench, %s\n\n", r.Started.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- machine: %s\n", r.Machine)
	fmt.Fprintf(&b, "- operator: %s (`%s`, MPIJob %s), flags: %s\n", r.OperatorVersion, o.operatorBin, o.api.Version, r.operatorFlags())
	if o.api != harness.V1 {
		b.WriteString("- upstream: not measured; upstream v0.8.0 cannot be built here (its module is not served by the Go module proxy)\n")
	}
	if r.cluster != "" {
		fmt.Fprintf(&b, "- cluster: %s\n", r.cluster)
	}
	fmt.Fprintf(&b, "- load average (1, 5, 15 min) at the start: %s; at the end: %s\n", r.LoadStart, harness.LoadAverage())
	fmt.Fprintf(&b, "- bench run time: %s\n", r.Duration.Round(time.Second))
	b.WriteString("\n")
	r.writeTargets(&b)
	if l := r.latency; l != nil {
		b.WriteString("\n")
		r.writeLatency(&b, l)
	}
	if l := r.load; l != nil {
		b.WriteString("\n")
		r.writeLatency(&b, l)
	}
	if bj := r.bigjob; bj != nil {
		b.WriteString("\n")
		r.writeBigJob(&b, bj)
	}
	if m := r.memory; m != nil {
		b.WriteString("\n")
		r.writeMemory(&b, m)
	}
	if r.latency == nil && r.load == nil && r.bigjob == nil && r.memory == nil {
		b.WriteString("\nNo scenario completed; see the log above.\n")
	}
	return b.String()
}

func (r *report) writeLatency(b *strings.Builder, l *latencyResult) {
	o := r.o
	title := "Latency"
	if l.p.scenario == scenarioLoad {
		title = "Load (the latency scenario at a higher load)"
	}
	fmt.Fprintf(b, "### %s: %d elastic jobs x %d workers, then %d resizes (%d to %d workers) at %g per second\n\n",
		title, l.p.jobs, o.workers, l.p.resizes, o.minWorkers, o.maxWorkers, l.p.rate)
	if !l.p.upstream && o.api == harness.V1 {
		b.WriteString("Upstream v0.3.0 was not measured at this load: it cannot be run at it here.\n\n")
	}
	fmt.Fprintf(b, "elasticPolicy minReplicas %d, maxReplicas %d, drainSeconds %d; seed %d. "+
		"Times from the bench's watch events (pods, ConfigMaps, %s).\n\n", o.minWorkers, o.maxWorkers, o.drainSeconds, o.seed, r.reachKind())
	t := harness.NewTable("measure", "p50", "p99", "max", "n", r.upColumn(" p50 / p99"))
	if o.api.ReachBySlices {
		summaryRow(t, "replica change -> every new worker resolves (EndpointSlice of the job's Service)", l.growReach, "")
	} else {
		summaryRow(t, "replica change -> launcher may exec into every new worker (Role)", l.growReach, r.upOf(l, upRole))
	}
	summaryRow(t, "replica change -> every new worker pod exists", l.growPods, r.upOf(l, upPods))
	summaryRow(t, "worker Running -> listed in discover_hosts.sh", l.discovery, r.upOf(l, upDiscovery))
	if o.api.ReachBySlices {
		summaryRow(t, "... Running -> its name resolves (the EndpointSlice controller's part)", l.resolve, "")
		summaryRow(t, "... name resolves -> listed (the operator's part)", l.resolvedListed, "")
	}
	summaryRow(t, fmt.Sprintf("... of the workers the %d jobs were created with", l.p.jobs), l.discoveryInitial, "")
	summaryRow(t, "... of the workers added by resizes", l.discoveryResize, "")
	summaryRow(t, "shrink -> victims gone from discover_hosts.sh", l.shrink, r.upOf(l, upShrink))
	summaryRow(t, fmt.Sprintf("replica change -> settled (new workers Running and listed; victims deleted after drainSeconds %d)", o.drainSeconds), l.settle, "")
	summaryRow(t, "job created -> its workers listed", l.jobListed, "")
	b.WriteString(t.String())
	b.WriteString("\n")

	c := harness.NewTable("check", "result", r.upColumn(""))
	c.Add("workers deleted while discover_hosts.sh listed them", fmt.Sprintf("%d of %d deleted workers (%d shrink victims)", len(l.anomalies.deletedWhileListed), l.deletedWorkers, l.victims), r.upOf(l, upDeleted))
	if len(l.anomalies.deletedWhileListed) > 0 {
		c.Add("  which", harness.ShortList(l.anomalies.deletedWhileListed), "")
	}
	c.Add("workers listed again after being marked draining or deleted", harness.CountOf(l.anomalies.listedAfterDrain), "")
	c.Add(r.unreachableCheck(), fmt.Sprintf("%s of %d", harness.CountOf(l.unreachable), l.createdWorkers), "")
	c.Add("workers Running but never listed (not drained)", harness.CountOf(l.neverListed), "")
	c.Add("workers created / marked draining beyond the replica changes", harness.CountOf(l.anomalies.unexpectedPods)+" / "+harness.CountOf(l.anomalies.unexpectedDrains), "")
	unsettled := fmt.Sprintf("%d of %d", len(l.unsettled), len(l.resizes)-l.excluded-l.failedResizes)
	c.Add(fmt.Sprintf("resizes not settled within %s", o.settleTimeout), unsettled, r.upOf(l, upUnsettled))
	if l.excluded > 0 {
		c.Add("resizes left out (issued while the same job was still resizing, or superseded)", fmt.Sprint(l.excluded), "")
	}
	if l.failedResizes > 0 {
		c.Add("resizes the API refused", fmt.Sprint(l.failedResizes), "")
	}
	c.Add(fmt.Sprintf("all %d jobs listing their workers", l.p.jobs), harness.FmtDur(l.allListed.Sub(l.start))+" after the first create", r.upOf(l, upAllListed))
	c.Add("workers listed before the bench saw them Running (counted as 0 s)", fmt.Sprint(l.earlyListed), "")
	if l.audit != nil {
		rest := countRequests(l.audit, l.restFrom, l.restTo)
		mins := o.restWindow.Minutes()
		c.Add(fmt.Sprintf("operator API writes at rest, %s (leader Lease excluded)", o.restWindow), breakdown(rest.writes), "")
		c.Add(fmt.Sprintf("leader-election Lease writes at rest, %s", o.restWindow), fmt.Sprintf("%d (%.0f a minute)", rest.leaseWrites, float64(rest.leaseWrites)/mins), r.upOf(l, upLeader))
		c.Add(fmt.Sprintf("operator API reads at rest, %s", o.restWindow), breakdown(rest.reads), "")
		create := countRequests(l.audit, l.start, l.resizesStart)
		c.Add(fmt.Sprintf("operator API writes while creating the %d jobs", l.p.jobs), breakdown(create.writes), "")
		resize := countRequests(l.audit, l.resizesStart, l.settled)
		n := max(len(l.resizes), 1)
		c.Add(fmt.Sprintf("operator API writes during the %d resizes (%.1f per resize)", len(l.resizes), float64(total(resize.writes))/float64(n)), breakdown(resize.writes), "")
		all := countRequests(l.audit, l.start, l.restTo)
		c.Add("operator requests refused (status >= 400)", breakdown(all.failed), "")
	} else {
		c.Add("operator API requests", "not measured (no audit log)", "")
	}
	c.Add(fmt.Sprintf("pod / ConfigMap / %s changes seen at rest, %s", r.reachKind(), o.restWindow),
		fmt.Sprintf("%d / %d / %d", l.restEvents["pod"], l.restEvents["configmap"], l.restEvents["role"]+l.restEvents["endpointslice"]), "")
	c.Add("operator peak RSS (VmHWM)", fmtMiB(l.mem.HWM), r.upOf(l, upRSS))
	c.Add("operator Go memory at the end", l.goMem.String(), "")
	c.Add("operator CPU time (user + system)", harness.FmtDur(l.cpu), "")
	c.Add("CPU time from the first create until every job settled", l.busy.String(), "")
	if l.histOK && l.hist.count > 0 {
		c.Add("operator's own mpi_operator_worker_discovery_seconds", fmt.Sprintf("n %.0f, p50 %s, p99 %s",
			l.hist.count, fmtBound(l.hist.quantileBound(0.5)), fmtBound(l.hist.quantileBound(0.99))), "")
	}
	c.Add("operator log", l.log.String(), "")
	b.WriteString(c.String())
	for _, s := range l.log.Samples(6) {
		fmt.Fprintf(b, "\n    %s", s)
	}
	if len(l.log.Samples(6)) > 0 {
		b.WriteString("\n")
	}
	if len(l.unsettled) > 0 {
		b.WriteString("\nUnsettled resizes:\n")
		for i, rz := range l.unsettled {
			if i == 10 {
				fmt.Fprintf(b, "- and %d more\n", len(l.unsettled)-10)
				break
			}
			fmt.Fprintf(b, "- %s\n", rz.describe())
		}
	}
}

func (r *report) writeMemory(b *strings.Builder, m *memoryResult) {
	fmt.Fprintf(b, "### Memory: %d worker pods (%d jobs x %d workers, no elasticPolicy)\n\n", m.pods, m.jobs, m.perJob)
	t := harness.NewTable("measure", "result", r.upColumn(" / target"))
	since := func(at time.Time) string {
		if at.IsZero() {
			return "not reached"
		}
		return harness.FmtDur(at.Sub(m.start))
	}
	t.Add("worker pods created / Running / listed at the end", fmt.Sprintf("%d / %d / %d of %d", m.created, m.running, m.listed, m.pods), "")
	t.Add("time from the first create until all workers exist", since(m.allCreated), "")
	t.Add("... until all are Running", since(m.allRunning), "")
	t.Add("... until the first worker is listed in discover_hosts.sh", since(m.firstListed), "")
	t.Add("... until all are listed in discover_hosts.sh", since(m.allListed), "")
	w := m.watched
	if rate, ok := w.creationRate(); ok {
		t.Add("worker pods created per second (watch: first to last creation)", fmt.Sprintf("%.0f (%d pods in %s)", rate, w.created, harness.FmtDur(w.lastCreated.Sub(w.firstCreated))), "")
	}
	if !w.lastRunning.IsZero() && !w.lastListed.IsZero() {
		t.Add("floor: the last worker Running (watch) / the last worker listed (watch), after the first create",
			fmt.Sprintf("%s / %s (gap %s)", since(w.lastRunning), since(w.lastListed), harness.FmtDur(w.lastListed.Sub(w.lastRunning))), "")
	}
	for _, row := range []struct {
		what string
		s    harness.Sample
	}{
		{"worker Running -> listed in discover_hosts.sh (p50 / p99 / max, n)", m.discovery},
		{"... Running -> its name resolves (the EndpointSlice controller's part)", m.resolve},
		{"... name resolves (and Running) -> listed (the operator's part)", m.resolvedListed},
	} {
		if sum := row.s.Summarize(); sum.N > 0 {
			t.Add(row.what, fmt.Sprintf("%s / %s / %s, %d", harness.FmtDur(sum.P50), harness.FmtDur(sum.P99), harness.FmtDur(sum.Max), sum.N), "")
		}
	}
	if !m.complete {
		t.Add("stopped waiting after", harness.FmtDur(m.end.Sub(m.start)), "")
	}
	t.Add("operator peak RSS (VmHWM) bringing the pods up", fmtMiB(m.mem.HWM)+rssVerdict(m.mem.HWM), r.up(upRSS10k+"; ")+"target <= 64 MiB without GOMEMLIMIT")
	t.Add("operator RSS at the end", fmtMiB(m.mem.RSS), "")
	t.Add("operator Go memory at the end", m.goMem.String(), "")
	t.Add("operator CPU time bringing the pods up", harness.FmtDur(m.cpu), "")
	t.Add("CPU time from the first create until every worker was listed", m.busy.String(), "")
	if m.audit != nil {
		up := countRequests(m.audit, m.from, m.end)
		t.Add("operator API writes bringing the pods up", breakdown(up.writes), "")
		t.Add("... refused (status >= 400)", breakdown(up.failed), "")
	}
	t.Add("operator log", m.log.String(), "")
	if m.restarted {
		d := m.restartTo.Sub(m.restartFrom)
		t.Add(fmt.Sprintf("fresh operator with the pods in place: peak RSS (VmHWM) over %s", d.Round(time.Second)), fmtMiB(m.restartMem.HWM)+rssVerdict(m.restartMem.HWM), "target <= 64 MiB without GOMEMLIMIT")
		t.Add("... its Go memory at the end", m.restartGoMem.String(), "")
		t.Add("... its CPU time", harness.FmtDur(m.restartCPU), "")
		if m.audit != nil {
			rc := countRequests(m.audit, m.restartFrom, m.restartTo)
			t.Add("... its API writes (leader Lease excluded)", breakdown(rc.writes), "")
			t.Add("... its leader Lease writes", fmt.Sprint(rc.leaseWrites), "")
			t.Add("... its API reads", breakdown(rc.reads), "")
		}
		t.Add("... pods / listed workers meanwhile", m.restartDelta, "")
		t.Add("... its log", m.restartLog.String(), "")
	}
	b.WriteString(t.String())
	for _, s := range append(m.log.Samples(6), m.restartLog.Samples(6)...) {
		fmt.Fprintf(b, "\n    %s", s)
	}
	if len(m.log.Samples(6))+len(m.restartLog.Samples(6)) > 0 {
		b.WriteString("\n")
	}
}

func (r *report) writeBigJob(b *strings.Builder, bj *bigResult) {
	fmt.Fprintf(b, "### Big job: one elastic MPIJob of %d workers, shrunk by %d, then grown back\n\n", bj.workers, bj.step)
	fmt.Fprintf(b, "elasticPolicy minReplicas 1, maxReplicas %d, drainSeconds %d. A step has settled when the job has exactly its workers, "+
		"all Running and listed in discover_hosts.sh, and no other worker pod; its CPU time and syncs are read %s later. "+
		"Object sizes are the JSON of each version the bench's watch saw (the MPIJob: its status only, when it changed).\n\n",
		bj.maxReplicas, r.o.drainSeconds, harness.FmtDur(stepTail))
	t := harness.NewTable("step", "workers", "settled in", "operator CPU", "syncs", "CPU per sync", "CPU per worker changed",
		"ConfigMap versions, bytes", "ConfigMap bytes per worker changed", r.reachKindSingular()+" versions, bytes", "status versions, bytes")
	for _, s := range bj.steps {
		settled := "not settled"
		if !s.settledAt.IsZero() {
			settled = harness.FmtDur(s.settledAt.Sub(s.start))
		}
		cpu, perSync, perWorker := "not measured", "-", "-"
		if s.cpuOK {
			cpu = harness.FmtDur(s.cpu)
			perWorker = fmtCPU(time.Duration(s.perWorker(float64(s.cpu))))
		}
		syncs := "not measured"
		if s.syncsOK {
			syncs = fmt.Sprintf("%.0f", s.syncs)
		}
		if d, ok := s.cpuPerSync(); ok {
			perSync = fmtCPU(d)
		}
		role := s.role.String()
		if r.o.api.ReachBySlices {
			role = "-"
		}
		t.Add(s.name, fmt.Sprintf("%d -> %d", s.from, s.to), settled, cpu, syncs, perSync, perWorker,
			s.configMap.String(), fmt.Sprintf("%.0f B", s.perWorker(float64(s.configMap.bytes))), role, s.status.String())
	}
	b.WriteString(t.String())
	c := harness.NewTable("check", "result")
	c.Add(fmt.Sprintf("steps not settled within %s", r.o.bigTimeout), harness.CountOf(bj.unsettled))
	c.Add("operator peak RSS (VmHWM)", fmtMiB(bj.mem.HWM))
	c.Add("operator log", bj.log.String())
	b.WriteString("\n")
	b.WriteString(c.String())
	for _, s := range bj.log.Samples(6) {
		fmt.Fprintf(b, "\n    %s", s)
	}
	if len(bj.log.Samples(6)) > 0 {
		b.WriteString("\n")
	}
}

// reachKindSingular names the object that lets the launcher reach the
// workers, in a column header.
func (r *report) reachKindSingular() string {
	if r.o.api.ReachBySlices {
		return "Role (none: v2beta1)"
	}
	return "Role"
}

// failedChecks lists the checks a correct operator passes whatever the
// machine's speed.
func (r *report) failedChecks() []string {
	var out []string
	out = append(out, r.latencyChecks("", r.latency)...)
	out = append(out, r.latencyChecks("load: ", r.load)...)
	if bj := r.bigjob; bj != nil {
		for _, s := range bj.unsettled {
			out = append(out, fmt.Sprintf("bigjob: the %s step did not settle within %s", s, r.o.bigTimeout))
		}
		if bj.log.Panics > 0 {
			out = append(out, "bigjob: the operator panicked")
		}
	}
	if m := r.memory; m != nil {
		if !m.complete {
			out = append(out, fmt.Sprintf("memory: only %d of %d workers listed", m.listed, m.pods))
		}
		if m.log.Panics+m.restartLog.Panics > 0 {
			out = append(out, "memory: the operator panicked")
		}
	}
	return out
}

// latencyChecks are the failed checks of a run of the latency scenario's
// code, each prefixed.
func (r *report) latencyChecks(prefix string, l *latencyResult) []string {
	if l == nil {
		return nil
	}
	var out []string
	add := func(format string, args ...any) { out = append(out, prefix+fmt.Sprintf(format, args...)) }
	if n := len(l.anomalies.deletedWhileListed); n > 0 {
		add("%d workers deleted while listed", n)
	}
	if n := len(l.anomalies.listedAfterDrain); n > 0 {
		add("%d workers listed after draining", n)
	}
	if n := len(l.unreachable); n > 0 {
		add("%d %s", n, r.unreachableCheck())
	}
	if n := len(l.unsettled); n > 0 {
		add("%d resizes did not settle", n)
	}
	if n := len(l.anomalies.unexpectedPods) + len(l.anomalies.unexpectedDrains); n > 0 {
		add("%d workers created or drained beyond the replica changes", n)
	}
	if n := len(l.neverListed); n > 0 {
		add("%d Running workers never listed", n)
	}
	if l.log.Panics > 0 {
		add("the operator panicked")
	}
	return out
}

// reachKind is what makes a worker reachable for the launcher.
func (r *report) reachKind() string {
	if r.o.api.ReachBySlices {
		return "EndpointSlices"
	}
	return "Roles"
}

// unreachableCheck names the check of harness.History.Unreachable.
func (r *report) unreachableCheck() string {
	if r.o.api.ReachBySlices {
		return "workers listed in discover_hosts.sh before their name resolved"
	}
	return "workers that existed before the Role allowed exec into them"
}

func rssVerdict(b int64) string {
	if b <= targetRSS10k {
		return " (within the target)"
	}
	return " (above the target)"
}
