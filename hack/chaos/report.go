package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/kubeflow/mpi-operator/test/harness"
)

type report struct {
	harness.RunInfo
	o   *options
	res *result
}

func (r *report) String() string {
	var b strings.Builder
	o, res := r.o, r.res
	fmt.Fprintf(&b, "## mpi-operator chaos run, %s\n\n", r.Started.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- seed %d (`go run ./hack/chaos --seed %d%s` makes the same choices)\n", o.seed, o.seed, map[bool]string{true: " --short"}[o.short])
	fmt.Fprintf(&b, "- machine: %s\n", r.Machine)
	fmt.Fprintf(&b, "- operator: %s (`%s`), two replicas at the binary's default flags (leader election on, Lease %s/%s), monitoring ports %d and %d\n",
		r.OperatorVersion, o.operatorBin, harness.OperatorNamespace, harness.LeaseName, operatorPorts[0], operatorPorts[1])
	if res != nil && res.cluster != "" {
		fmt.Fprintf(&b, "- cluster: %s\n", res.cluster)
	}
	fmt.Fprintf(&b, "- load average (1, 5, 15 min) at the start: %s; at the end: %s\n", r.LoadStart, harness.LoadAverage())
	fmt.Fprintf(&b, "- run time: %s", r.Duration.Round(time.Second))
	if res != nil && !res.chaosFrom.IsZero() && !res.lastFault.IsZero() {
		fmt.Fprintf(&b, " (jobs settled after their creation in %s; faults for %s)", harness.FmtDur(res.startSettle),
			res.lastFault.Sub(res.chaosFrom).Round(time.Second))
	}
	b.WriteString("\n")
	if res == nil || res.chaosFrom.IsZero() {
		b.WriteString("\nThe run stopped before the faults; see the progress log.\n")
		return b.String()
	}
	b.WriteString("\n")
	b.WriteString(r.faults().String())
	if c := res.checks; c != nil {
		b.WriteString("\n")
		b.WriteString(r.checks().String())
	} else {
		b.WriteString("\nThe run stopped before the checks; see the progress log.\n")
	}
	if len(res.logs.groups) > 0 {
		b.WriteString("\nError lines of the operator logs, grouped (numbers masked in the grouping):\n\n")
		t := harness.NewTable("lines", "first", "explained by", "message")
		for _, g := range res.logs.groups {
			why := g.explained
			if why == "" {
				why = "**nothing**"
			}
			t.Add(fmt.Sprint(g.count), g.first.Format("15:04:05.000"), why, "`"+strings.ReplaceAll(g.msg, "`", "'")+"`")
		}
		b.WriteString(t.String())
	}
	writeList(&b, "Jobs not settled", res.checks.unsettledOrNil())
	writeList(&b, "Unexplained error lines", res.logs.unexplainedSamples)
	writeList(&b, "Panics", res.logs.panics)
	fmt.Fprintf(&b, "\nTimeline of the run: `%s`; operator logs: `%s`.\n",
		filepath.Join(o.localDir, "timeline.log"), filepath.Join(o.localDir, "operator-<replica>-<run>.log"))
	return b.String()
}

func writeList(b *strings.Builder, title string, items []string) {
	if len(items) == 0 {
		return
	}
	fmt.Fprintf(b, "\n%s:\n", title)
	for _, s := range items {
		fmt.Fprintf(b, "- %s\n", s)
	}
}

func (c *finalChecks) unsettledOrNil() []string {
	if c == nil {
		return nil
	}
	return c.unsettled
}

func (r *report) faults() *harness.Table {
	o, res := r.o, r.res
	t := harness.NewTable("fault or operation", "count", "details")
	drains := make([]string, len(drainChoices))
	for i, d := range drainChoices {
		drains[i] = fmt.Sprint(d)
	}
	t.Add("elastic MPIJobs", fmt.Sprint(o.jobs), fmt.Sprintf("minReplicas %d, maxReplicas %d, drainSeconds %s in turn",
		o.minWorkers, o.maxWorkers, strings.Join(drains, "/")))
	byMethod := map[string]int{}
	retried, failed := 0, 0
	for _, op := range res.ops {
		byMethod[op.method]++
		if op.attempts > 1 {
			retried++
		}
		if op.err != nil {
			failed++
		}
	}
	var parts []string
	for _, m := range methods {
		parts = append(parts, fmt.Sprintf("%d %s", byMethod[m], m))
	}
	t.Add("scale operations (random job, random size)", fmt.Sprint(len(res.ops)),
		fmt.Sprintf("%s; %d sent more than once (conflict or API server down), %d failed", strings.Join(parts, ", "), retried, failed))
	var led harness.Sample
	for _, k := range res.kills {
		led = append(led, k.ledFor)
	}
	ls := led.Summarize()
	t.Add("SIGKILLs of the leading replica, at random moments", fmt.Sprint(len(res.kills)),
		fmt.Sprintf("after it had held the Lease for %s to %s (median %s): a random wait of up to %s once the harness saw it lead, "+
			"plus the API server restart in the cycles that have one",
			harness.FmtDur(minDur(led)), harness.FmtDur(ls.Max), harness.FmtDur(ls.P50), o.maxDwell))
	var downs []string
	for _, rs := range res.restarts {
		downs = append(downs, harness.FmtDur(rs.Downtime()))
	}
	t.Add("kube-apiserver restarts (SIGTERM, same command line, wait for /readyz)", fmt.Sprint(len(res.restarts)),
		"ready again after "+orNone(strings.Join(downs, ", ")))
	var windows []string
	for _, r := range res.refusals {
		windows = append(windows, harness.FmtDur(r.to.Sub(r.from)))
	}
	t.Add("ConfigMap updates refused (a ValidatingAdmissionPolicy; each window spans a kill of the leader and a scale-in)", fmt.Sprint(len(res.refusals)),
		fmt.Sprintf("for %s; the jobs' Warning events that tell of a refused write: %d", orNone(strings.Join(windows, ", ")), res.refusedEvents))
	if o.webhookDelay > 0 {
		ws := res.webhookDelays.Summarize()
		t.Add("pod creations held by a slow validating webhook", fmt.Sprint(len(res.webhookDelays)),
			fmt.Sprintf("a random delay up to %s each: p50 %s, max %s", o.webhookDelay, harness.FmtDur(ws.P50), harness.FmtDur(ws.Max)))
	}
	t.Add("operator processes", fmt.Sprint(len(res.runs)), fmt.Sprintf("%d exits or failed starts not caused by a kill", len(res.exits)))
	return t
}

func minDur(s harness.Sample) time.Duration {
	if len(s) == 0 {
		return 0
	}
	m := s[0]
	for _, d := range s {
		m = min(m, d)
	}
	return m
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (r *report) checks() *harness.Table {
	res, c := r.res, r.res.checks
	t := harness.NewTable("check", "result")
	settled := fmt.Sprintf("%d of %d", c.jobs-len(c.unsettled), c.jobs)
	if res.settled {
		settled += fmt.Sprintf(", %s after the last fault ended", harness.FmtDur(res.settleTime))
		var last time.Time
		for _, op := range res.ops {
			if op.done.After(last) {
				last = op.done
			}
		}
		if last.After(res.lastFault) {
			settled += fmt.Sprintf(" and %s after the last scale operation", harness.FmtDur(res.settleTime-last.Sub(res.lastFault)))
		}
	} else {
		settled += fmt.Sprintf(" within %s", r.o.settleTimeout)
	}
	t.Add("jobs settled: exactly their desired workers, all Running, listed in discover_hosts.sh and allowed exec, nothing else, one launcher, status counting them", settled)
	t.Add("jobs whose live workers are not their desired replicas", harness.CountOf(c.wrongCount))
	t.Add("duplicate pods (two live workers with one index, more worker pods than wanted, two launchers)", harness.CountOf(c.duplicates))
	t.Add("orphaned pods (no live controlling MPIJob, or matching no job)", fmt.Sprintf("%s of %d pods", harness.CountOf(c.orphans), c.pods))
	t.Add("workers deleted while discover_hosts.sh listed them (whole run, etcd's watch in revision order)",
		fmt.Sprintf("%s of %d deleted", harness.CountOf(c.deletedWhileListed), c.deletedWorkers))
	t.Add("workers listed again after their draining mark or deletion", harness.CountOf(c.listedAfterDrain))
	t.Add("listed worker names given to a new pod", harness.CountOf(c.listedNameReused))
	t.Add("workers created while the Role did not allow exec into them", fmt.Sprintf("%s of %d created", harness.CountOf(c.roleAfterPod), c.createdWorkers))
	t.Add(fmt.Sprintf("jobs with more than %d live workers at any time", r.o.maxWorkers), harness.CountOf(c.aboveMax))
	t.Add("exec rights beyond current workers (SubjectAccessReview as each launcher's ServiceAccount: every worker name the job ever had, and names it never had)",
		fmt.Sprintf("%s of %d names", harness.CountOf(c.execBeyond), c.execChecked))
	t.Add("current workers the launcher may not exec into", harness.CountOf(c.execMissing))
	var took harness.Sample
	var failed []string
	for _, k := range res.kills {
		if k.by == nil {
			failed = append(failed, fmt.Sprintf("kill %d of %s: %v", k.seq, k.run, k.err))
			continue
		}
		took = append(took, k.takeover)
	}
	ts := took.Summarize()
	t.Add("leader killed -> the standby holds the Lease (to its acquireTime)",
		fmt.Sprintf("%d of %d kills; p50 %s, max %s; not taken over: %s", ts.N, len(res.kills), harness.FmtDur(ts.P50), harness.FmtDur(ts.Max), harness.CountOf(failed)))
	t.Add("operator exits or failed starts outside API server restarts", harness.CountOf(res.unexplainedExits()))
	t.Add(fmt.Sprintf("worker, discover_hosts.sh or Role changes in %s at rest after settling", r.o.restWindow), restChanges(res))
	t.Add("writes of the namespace the harness's etcd watch could not read (the history checks need all)",
		fmt.Sprintf("%s (streams resumed: %d)", harness.CountOf(res.watchLost), len(res.watchResumed)))
	t.Add("panics in the operator logs", harness.CountOf(res.logs.panics))
	t.Add("error lines in the operator logs not explained by the injected faults",
		fmt.Sprintf("%d of %d error lines (%d runs; %d warnings, %d error lines after the final SIGTERM not counted)",
			res.logs.unexplained, res.logs.errors, res.logs.runs, res.logs.warnings, res.logs.shutdownErrors))
	return t
}

func restChanges(res *result) string {
	if !res.settled {
		return "not measured (not settled)"
	}
	return fmt.Sprint(res.restChanges)
}

// unexplainedExits are exits and failed starts outside every API server
// restart's window.
func (res *result) unexplainedExits() []string {
	var out []string
	for _, e := range res.exits {
		explained := false
		for _, rs := range res.restarts {
			end := rs.Ready
			if end.IsZero() {
				end = time.Now()
			}
			if !e.at.Before(rs.Stopping) && !e.at.After(end.Add(outageGrace)) {
				explained = true
			}
		}
		if !explained {
			out = append(out, fmt.Sprintf("%s replica %d: %s", e.at.Format("15:04:05.000"), e.slot, e.what))
		}
	}
	return out
}

// failedChecks lists the checks that failed.
func (res *result) failedChecks() []string {
	c := res.checks
	if c == nil {
		return []string{"the checks did not run"}
	}
	var out []string
	add := func(n int, what string) {
		if n > 0 {
			out = append(out, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(len(c.unsettled), "jobs not settled")
	add(len(c.wrongCount), "jobs without their desired workers")
	add(len(c.duplicates), "duplicates")
	add(len(c.orphans), "orphaned pods")
	add(len(c.deletedWhileListed), "workers deleted while listed")
	add(len(c.listedAfterDrain), "workers listed after draining")
	add(len(c.listedNameReused), "listed names reused")
	add(len(c.roleAfterPod), "workers created before the Role allowed them")
	add(len(c.aboveMax), "jobs above maxReplicas")
	add(len(c.execBeyond), "exec rights beyond current workers")
	add(len(c.execMissing), "current workers without exec rights")
	failedTakeovers := 0
	for _, k := range res.kills {
		if k.by == nil {
			failedTakeovers++
		}
	}
	add(failedTakeovers, "kills without a takeover by the standby")
	add(len(res.unexplainedExits()), "unexplained operator exits")
	if res.settled {
		add(res.restChanges, "changes at rest")
	}
	add(len(res.watchLost), "writes the etcd watch could not read")
	add(len(res.logs.panics), "panics")
	add(res.logs.unexplained, "unexplained error lines")
	return out
}
