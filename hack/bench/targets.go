package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// The design targets the Targets table holds the run against.
const (
	// targetListed bounds the p99 of worker Running -> listed, and of
	// shrink -> victims unlisted.
	targetListed = 100 * time.Millisecond
	// targetQPSShare: pod creation runs at the creations' client rate
	// limit when it reaches this share of it.
	targetQPSShare = 0.9
	// targetFloorGap bounds the time from the last worker Running to the
	// last worker listed, in a large start.
	targetFloorGap = time.Second
	// upstreamWritesPerResize is upstream v0.3.0's count on this control
	// plane: 980 writes for 100 resizes.
	upstreamWritesPerResize = 9.8
	// targetQuadratic bounds the ratio of a later step's cost per worker
	// changed to the creation's, in the big job.
	targetQuadratic = 3.0
	// targetRSS10kNoLimit bounds the peak RSS with 10,000 worker pods,
	// without GOMEMLIMIT.
	targetRSS10kNoLimit = 64 << 20
	// targetRSSPods is the pod count the RSS target is about.
	targetRSSPods = 10000
)

const (
	metYes = "yes"
	metNo  = "no"
	metNA  = "n/a"
)

// targetRow is one row of the Targets table.
type targetRow struct{ target, measured, met string }

func met(ok bool) string {
	if ok {
		return metYes
	}
	return metNo
}

func notRun(target, scenario string) targetRow {
	return targetRow{target, fmt.Sprintf("not measured (scenario %s not run or not completed)", scenario), metNA}
}

// targets computes the Targets table from the run's measurements.
func (r *report) targets() []targetRow {
	var rows []targetRow
	rows = append(rows, r.largeStartTargets()...)
	rows = append(rows, r.loadTargets()...)
	rows = append(rows, r.writesTargets()...)
	rows = append(rows, r.bigJobTargets()...)
	rows = append(rows, r.rssTarget())
	return rows
}

func (r *report) writeTargets(b *strings.Builder) {
	b.WriteString("### Targets\n\n")
	t := harness.NewTable("target", "measured", "met")
	for _, row := range r.targets() {
		t.Add(row.target, row.measured, row.met)
	}
	b.WriteString(t.String())
	b.WriteString("\nMissing a target is no failure of the run; the safety checks below are.\n")
}

// p99Row holds a sample's p99 against a bound.
func p99Row(target string, s harness.Sample, bound time.Duration, extra string) targetRow {
	sum := s.Summarize()
	if sum.N == 0 {
		return targetRow{target, "no measurement" + extra, metNo}
	}
	return targetRow{target, fmt.Sprintf("p99 %s (p50 %s, max %s, n %d)%s",
		harness.FmtDur(sum.P99), harness.FmtDur(sum.P50), harness.FmtDur(sum.Max), sum.N, extra), met(sum.P99 <= bound)}
}

func (r *report) largeStartTargets() (rows []targetRow) {
	m := r.memory
	what := "Large start"
	if m != nil {
		what = fmt.Sprintf("Large start (%d jobs x %d workers at once, memory scenario)", m.jobs, m.perJob)
	}
	tListed := what + ": worker Running -> listed in discover_hosts.sh, p99 <= " + harness.FmtDur(targetListed)
	qps, qpsOK := operatorQPS(r.o.operatorArgs, r.operatorDefaults)
	qpsName := "the client's QPS limit"
	if qpsOK {
		qpsName = fmt.Sprintf("the client's QPS limit (--kube-api-qps %g, of the pod creations' own client)", qps)
	}
	tRate := fmt.Sprintf("%s: pod creation at %s: >= %.0f%% of it", what, qpsName, targetQPSShare*100)
	tFloor := fmt.Sprintf("%s: all jobs listing every worker within %s of the floor (the last worker Running)", what, harness.FmtDur(targetFloorGap))
	tCPU := what + ": CPU used from the first create until every worker was listed (where the time goes)"
	if m == nil {
		return []targetRow{notRun(tListed, scenarioMemory), notRun(tRate, scenarioMemory), notRun(tFloor, scenarioMemory), notRun(tCPU, scenarioMemory)}
	}
	defer func() { rows = append(rows, targetRow{tCPU, m.busy.String(), metNA}) }()
	var split string
	if sum := m.resolvedListed.Summarize(); sum.N > 0 {
		split = fmt.Sprintf("; of which the operator's part (name resolves -> listed) p99 %s, p50 %s",
			harness.FmtDur(sum.P99), harness.FmtDur(sum.P50))
	}
	rows = []targetRow{p99Row(tListed, m.discovery, targetListed, split)}

	rate, rateOK := m.watched.creationRate()
	switch {
	case !rateOK:
		rows = append(rows, targetRow{tRate, "not measured (fewer than two creations seen)", metNA})
	case !qpsOK:
		rows = append(rows, targetRow{tRate, fmt.Sprintf("%.0f pods/s; the operator's --kube-api-qps is unknown", rate), metNA})
	default:
		rows = append(rows, targetRow{tRate, fmt.Sprintf("%.0f pods/s (%d pods in %s, from the watch) = %.0f%% of %g",
			rate, m.watched.created, harness.FmtDur(m.watched.lastCreated.Sub(m.watched.firstCreated)), 100*rate/qps, qps),
			met(rate >= targetQPSShare*qps)})
	}

	w := m.watched
	switch {
	case !m.complete || w.lastListed.IsZero() || w.lastRunning.IsZero():
		rows = append(rows, targetRow{tFloor, fmt.Sprintf("not every worker listed: %d of %d", m.listed, m.pods), metNo})
	default:
		gap := w.lastListed.Sub(w.lastRunning)
		rows = append(rows, targetRow{tFloor, fmt.Sprintf("last worker listed %s after the first create; floor (last worker Running) %s; gap %s",
			harness.FmtDur(w.lastListed.Sub(m.start)), harness.FmtDur(w.lastRunning.Sub(m.start)), harness.FmtDur(gap)),
			met(gap <= targetFloorGap)})
	}
	return rows
}

func (r *report) loadTargets() []targetRow {
	l := r.load
	what := fmt.Sprintf("Load (%d jobs, %d resizes at %g/s)", r.o.loadJobs, r.o.loadResizes, r.o.loadRate)
	tListed := what + ": worker Running -> listed, p99 <= " + harness.FmtDur(targetListed)
	tShrink := what + ": shrink -> victims unlisted, p99 <= " + harness.FmtDur(targetListed)
	tCPU := what + ": CPU used from the first create until settled (where the time goes)"
	if l == nil {
		return []targetRow{notRun(tListed, scenarioLoad), notRun(tShrink, scenarioLoad), notRun(tCPU, scenarioLoad)}
	}
	upstream := "; upstream v0.3.0: not measured (it cannot be run at this load here)"
	if r.o.api != harness.V1 {
		upstream = ""
	}
	return []targetRow{
		p99Row(tListed, l.discovery, targetListed, upstream),
		p99Row(tShrink, l.shrink, targetListed, upstream),
		{tCPU, l.busy.String(), metNA},
	}
}

// resizeCounts are the operator's writes while the resizes ran.
type resizeCounts struct {
	resizes                      int
	writes                       int
	eventsCreated, eventsPatched int
	statusWrites                 int
	launcherPatches              int
	hostChanges                  int
	ok                           bool
}

// countResizeWrites counts the audit events of the latency scenario's
// resizes, from the first resize until every job settled; and the
// launcher patches from the first create on, since the hosts the jobs
// were created with are the first change that may patch a launcher (and
// the last of those patches can land after the first resize).
func countResizeWrites(l *latencyResult) resizeCounts {
	c := resizeCounts{resizes: len(l.resizes), hostChanges: l.hostChanges}
	if l.audit == nil || c.resizes == 0 {
		return c
	}
	c.ok = true
	for i := range l.audit {
		e := &l.audit[i]
		t := e.RequestReceivedTimestamp
		if t.Before(l.start) || !t.Before(l.settled) || !isWriteVerb(e.Verb) {
			continue
		}
		res := e.resource()
		if res == "pods" && e.Verb == "patch" && e.ObjectRef != nil && harness.IsLauncherPod(e.ObjectRef.Name) {
			c.launcherPatches++
		}
		if t.Before(l.resizesStart) || res == "leases" {
			continue
		}
		c.writes++
		switch {
		case res == "events" && e.Verb == "create":
			c.eventsCreated++
		case res == "events":
			c.eventsPatched++
		case res == "mpijobs/status":
			c.statusWrites++
		}
	}
	return c
}

func (r *report) writesTargets() []targetRow {
	tWrites := fmt.Sprintf("Writes per resize <= %.1f (upstream v0.3.0's count measured on this control plane: 980 writes per 100 resizes)", upstreamWritesPerResize)
	tEvents := "Events created per scale step <= 1"
	// A resize changes the status twice at most: the Resizing condition
	// set, and cleared (a shrink's at least drainSeconds later); changes
	// within a second go in one write, the replica counts with them.
	tStatus := "Status writes per resize <= 2 (the Resizing condition set and cleared, the counts with them)"
	tPatches := "Launcher pod patches only when the listed hosts change"
	l := r.latency
	if l == nil {
		return []targetRow{notRun(tWrites, scenarioLatency), notRun(tEvents, scenarioLatency), notRun(tStatus, scenarioLatency), notRun(tPatches, scenarioLatency)}
	}
	c := countResizeWrites(l)
	if !c.ok {
		why := "not measured (no audit log)"
		if c.resizes == 0 {
			why = "not measured (no resizes)"
		}
		return []targetRow{{tWrites, why, metNA}, {tEvents, why, metNA}, {tStatus, why, metNA}, {tPatches, why, metNA}}
	}
	n := float64(c.resizes)
	return []targetRow{
		{tWrites, fmt.Sprintf("%.1f (%d writes, Lease excluded, / %d resizes; latency scenario)", float64(c.writes)/n, c.writes, c.resizes),
			met(float64(c.writes)/n <= upstreamWritesPerResize)},
		{tEvents, fmt.Sprintf("%.2f (%d created / %d resizes; %d patched)", float64(c.eventsCreated)/n, c.eventsCreated, c.resizes, c.eventsPatched),
			met(float64(c.eventsCreated)/n <= 1)},
		{tStatus, fmt.Sprintf("%.2f (%d / %d resizes)", float64(c.statusWrites)/n, c.statusWrites, c.resizes),
			met(float64(c.statusWrites)/n <= 2)},
		{tPatches, fmt.Sprintf("%d patches; %d changes of the listed hosts seen (the jobs' creation and %d resizes)", c.launcherPatches, c.hostChanges, c.resizes),
			met(c.launcherPatches <= c.hostChanges)},
	}
}

// stepRatios is a later step's figure per worker changed over the
// creation's, for the grow and the shrink step; ok is false when a step
// is missing, did not settle, or the creation's figure is 0.
func stepRatios(b *bigResult, figure func(*bigStep) (float64, bool)) (grow, shrink float64, ok bool) {
	c, g, s := b.stepNamed("create"), b.stepNamed("grow"), b.stepNamed("shrink")
	if c == nil || g == nil || s == nil || c.settledAt.IsZero() || g.settledAt.IsZero() || s.settledAt.IsZero() {
		return 0, 0, false
	}
	per := func(st *bigStep) (float64, bool) {
		v, ok := figure(st)
		return st.perWorker(v), ok && st.changed() > 0
	}
	cv, ok1 := per(c)
	gv, ok2 := per(g)
	sv, ok3 := per(s)
	if !ok1 || !ok2 || !ok3 || cv <= 0 {
		return 0, 0, false
	}
	return gv / cv, sv / cv, true
}

func stepCPU(s *bigStep) (float64, bool)     { return s.cpu.Seconds(), s.cpuOK }
func stepCMBytes(s *bigStep) (float64, bool) { return float64(s.configMap.bytes), true }

func (r *report) bigJobTargets() []targetRow {
	b := r.bigjob
	what := fmt.Sprintf("Big job (%d workers, shrunk by %d, grown back): no step quadratic in the workers", r.o.bigWorkers, r.o.bigStep)
	tCPU := fmt.Sprintf("%s: operator CPU per worker changed, shrink and grow <= %gx the creation's", what, targetQuadratic)
	tCM := fmt.Sprintf("%s: ConfigMap bytes written per worker changed, shrink and grow <= %gx the creation's", what, targetQuadratic)
	if b == nil {
		return []targetRow{notRun(tCPU, scenarioBigJob), notRun(tCM, scenarioBigJob)}
	}
	row := func(target string, figure func(*bigStep) (float64, bool), unit func(float64) string) targetRow {
		g, s, ok := stepRatios(b, figure)
		if !ok {
			if len(b.unsettled) > 0 {
				return targetRow{target, "a step did not settle: " + strings.Join(b.unsettled, ", "), metNo}
			}
			return targetRow{target, "not measured", metNA}
		}
		per := func(name string) string {
			st := b.stepNamed(name)
			v, _ := figure(st)
			return unit(st.perWorker(v))
		}
		return targetRow{target, fmt.Sprintf("create %s, shrink %s (%.2fx), grow %s (%.2fx) per worker",
			per("create"), per("shrink"), s, per("grow"), g), met(g <= targetQuadratic && s <= targetQuadratic)}
	}
	return []targetRow{
		row(tCPU, stepCPU, func(v float64) string { return fmtCPU(time.Duration(v * float64(time.Second))) }),
		row(tCM, stepCMBytes, func(v float64) string { return fmt.Sprintf("%.0f B", v) }),
	}
}

// goMemLimit is the GOMEMLIMIT the operator ran with, or "".
func (r *report) goMemLimit() string {
	for _, kv := range r.o.operatorEnv {
		if v, ok := strings.CutPrefix(kv, "GOMEMLIMIT="); ok {
			return v
		}
	}
	return ""
}

func (r *report) rssTarget() targetRow {
	target := fmt.Sprintf("Peak RSS with %s worker pods <= %s without GOMEMLIMIT (VmHWM of the operator that created them / of a fresh start)",
		fmtThousands(targetRSSPods), fmtMiB(targetRSS10kNoLimit))
	m := r.memory
	if m == nil {
		return notRun(target, scenarioMemory)
	}
	measured := fmtMiB(m.mem.HWM) + " / "
	if m.restarted {
		measured += fmtMiB(m.restartMem.HWM)
	} else {
		measured += "no fresh start"
	}
	measured += fmt.Sprintf(" with %d worker pods", m.pods)
	switch {
	case r.goMemLimit() != "":
		return targetRow{target, measured + ", with GOMEMLIMIT=" + r.goMemLimit(), metNA}
	case m.pods < targetRSSPods:
		return targetRow{target, measured + " (fewer than the target's)", metNA}
	case !m.complete:
		return targetRow{target, measured + fmt.Sprintf(" (only %d listed)", m.listed), metNA}
	case !m.restarted:
		return targetRow{target, measured, metNA}
	}
	return targetRow{target, measured, met(m.mem.HWM <= targetRSS10kNoLimit && m.restartMem.HWM <= targetRSS10kNoLimit)}
}

// fmtThousands prints a count with commas between the thousands.
func fmtThousands(n int) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}
