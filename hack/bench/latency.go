package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"

	"github.com/kubeflow/mpi-operator/test/harness"
)

const (
	latencyNamespace = "mpi-bench"
	loadNamespace    = "mpi-bench-load"
)

// latencyParams are the sizes of one run of the latency scenario's code:
// the latency scenario itself, or the load scenario, the same at a higher
// load.
type latencyParams struct {
	scenario  string // scenarioLatency or scenarioLoad
	namespace string
	jobs      int
	resizes   int
	rate      float64
	// upstream is true when the report shows upstream v0.3.0's figures
	// beside these: it was measured with the latency scenario's defaults,
	// and could not be run at the load scenario's.
	upstream bool
}

func (o *options) latencyParams() latencyParams {
	return latencyParams{scenario: scenarioLatency, namespace: latencyNamespace, jobs: o.jobs, resizes: o.resizes, rate: o.rate, upstream: true}
}

func (o *options) loadParams() latencyParams {
	return latencyParams{scenario: scenarioLoad, namespace: loadNamespace, jobs: o.loadJobs, resizes: o.loadResizes, rate: o.loadRate}
}

// latencyResult is everything the latency scenario measured.
type latencyResult struct {
	p                                       latencyParams
	start, allListed, resizesStart, settled time.Time
	// settledAll is false when some resize had not settled in time.
	settledAll bool

	discovery, shrink, growReach, growPods, settle, jobListed harness.Sample
	// resolve: each worker from Running to its name resolving, and
	// resolvedListed from then to its listing (v2beta1).
	resolve, resolvedListed harness.Sample
	// discovery split: workers the jobs were created with, and workers
	// added by resizes.
	discoveryInitial, discoveryResize harness.Sample
	// earlyListed counts workers listed before the bench saw them Running
	// (a race between two watch streams; counted as 0 s).
	earlyListed int

	resizes                 []*resizeRec
	excluded, failedResizes int
	unsettled               []*resizeRec
	neverListed             []string
	// unreachable: workers that existed before the Role allowed exec
	// into them (v1), or that were listed before their name resolved
	// (v2beta1).
	unreachable             []string
	createdWorkers          int
	deletedWorkers, victims int
	anomalies               anomalies

	// hostChanges counts the changes of any job's listed hosts that the
	// bench saw from the first create until every job settled.
	hostChanges int

	restFrom, restTo time.Time
	restEvents       map[string]int
	audit            []auditEvent // nil without an audit log

	mem   procMemory
	goMem goMemory
	cpu   time.Duration
	// busy is the CPU time used from the first create until every job
	// settled, by the operator and by the control plane's processes.
	busy cpuWindow
	log  harness.LogSummary
	hist histogram
	// histOK is false when /metrics had no discovery histogram.
	histOK bool
}

// waitUntil waits until cond (called with the recorder locked) holds, the
// timeout passes (false), the operator dies or ctx ends (error).
func waitUntil(ctx context.Context, rec *recorder, op *harness.Operator, timeout time.Duration, cond func() bool) (bool, error) {
	deadline := time.After(timeout)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		rec.mu.Lock()
		ok := cond()
		rec.mu.Unlock()
		if ok {
			return true, nil
		}
		if err := op.DiedErr(); err != nil {
			return false, err
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-deadline:
			return false, nil
		case <-rec.changed:
		case <-tick.C:
		}
	}
}

// sleepCtx sleeps d, checking the operator every second.
func sleepCtx(ctx context.Context, op *harness.Operator, d time.Duration) error {
	end := time.Now().Add(d)
	for {
		if err := op.DiedErr(); err != nil {
			return err
		}
		left := time.Until(end)
		if left <= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(left, time.Second)):
		}
	}
}

func runLatency(ctx context.Context, o *options, cl *cluster, p latencyParams) (*latencyResult, error) {
	res := &latencyResult{p: p}
	name := p.scenario
	if err := cl.FreshNamespace(ctx, p.namespace); err != nil {
		return nil, err
	}
	rec := newRecorder(o.api)
	stopWatch, err := harness.WatchNamespace(cl.Kube, o.api, p.namespace, func(kind string) cache.ResourceEventHandler { return rec.handlers(kind) })
	if err != nil {
		return nil, err
	}
	defer stopWatch()

	op, err := startOperator(ctx, o, cl.OperatorKubeconfig, filepath.Join(o.localDir, "operator-"+name+".log"))
	if err != nil {
		return nil, err
	}
	defer op.Stop()

	// 1. The jobs.
	logf("%s: creating %d jobs of %d workers (elastic %d..%d, drainSeconds %d)", name, p.jobs, o.workers, o.minWorkers, o.maxWorkers, o.drainSeconds)
	ep := &kubeflow.ElasticPolicy{
		MinReplicas:  ptr.To(int32(o.minWorkers)),
		MaxReplicas:  ptr.To(int32(o.maxWorkers)),
		DrainSeconds: ptr.To(int32(o.drainSeconds)),
	}
	res.busy.begin(op, cl)
	res.start = time.Now()
	names := make([]string, p.jobs)
	for i := range p.jobs {
		names[i] = fmt.Sprintf("bench-%03d", i)
		rec.addJob(names[i], o.workers)
		job := harness.NewJob(p.namespace, names[i], o.workers, ep)
		if err := o.api.CreateJob(ctx, cl.Dynamic, job); err != nil {
			return nil, fmt.Errorf("creating MPIJob %s: %w", names[i], err)
		}
	}
	ok, err := waitUntil(ctx, rec, op, o.settleTimeout, func() bool {
		for _, j := range rec.jobs {
			if j.listedAt.IsZero() {
				return false
			}
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if !ok {
		rec.mu.Lock()
		var missing []string
		for _, n := range names {
			if j := rec.jobs[n]; j.listedAt.IsZero() {
				missing = append(missing, n)
			}
		}
		rec.mu.Unlock()
		return nil, fmt.Errorf("%d of %d jobs did not list their %d workers within %s: %s", len(missing), p.jobs, o.workers, o.settleTimeout, harness.ShortList(missing))
	}
	rec.mu.Lock()
	for _, j := range rec.jobs {
		if j.listedAt.After(res.allListed) {
			res.allListed = j.listedAt
		}
	}
	rec.mu.Unlock()
	logf("%s: all %d jobs list their workers, %s after the first create", name, p.jobs, res.allListed.Sub(res.start).Round(time.Millisecond))

	// The creation's tail (launchers turning Running, the status writes
	// that wait for the counts) belongs to the creation, not the resizes:
	// they start once the operator's syncs stand still.
	if err := waitQuiet(ctx, op); err != nil {
		return nil, err
	}

	// 2. The resizes.
	res.resizesStart = time.Now()
	logf("%s: %d resizes (%d..%d workers) at %g per second, seed %d", name, p.resizes, o.minWorkers, o.maxWorkers, p.rate, o.seed)
	if err := driveResizes(ctx, o, cl, rec, op, names, res); err != nil {
		return nil, err
	}
	logf("%s: resizes issued in %s; waiting up to %s for them to settle", name, time.Since(res.resizesStart).Round(time.Millisecond), o.settleTimeout)
	ok, err = waitUntil(ctx, rec, op, o.settleTimeout, func() bool {
		for _, j := range rec.jobs {
			if !j.idle() {
				return false
			}
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	res.settledAll = ok
	res.settled = time.Now()
	res.busy.end(op)
	switch {
	case ok && len(res.resizes) > 0:
		logf("%s: every job settled, %s after the last resize was issued", name, res.settled.Sub(res.resizes[len(res.resizes)-1].at).Round(time.Millisecond))
	case ok:
		logf("%s: every job settled", name)
	default:
		logf("%s: some resizes did not settle within %s", name, o.settleTimeout)
	}

	// 3. At rest.
	res.restFrom = res.settled.Add(o.restGrace)
	res.restTo = res.restFrom.Add(o.restWindow)
	logf("%s: at rest for %s (after a grace of %s)", name, o.restWindow, o.restGrace)
	if err := sleepCtx(ctx, op, time.Until(res.restTo)); err != nil {
		return nil, err
	}

	if res.mem, err = memoryOf(op); err != nil {
		return nil, err
	}
	if res.cpu, err = cpuOf(op); err != nil {
		return nil, err
	}
	if text, err := op.Get(ctx, "/metrics"); err == nil {
		res.hist, res.histOK = parseHistogram(text, "mpi_operator_worker_discovery_seconds")
		res.goMem = parseGoMemory(text)
	}
	op.Stop()
	res.log = op.ScanLog()
	if cl.auditLog != "" {
		if res.audit, err = cl.readAudit(); err != nil {
			return nil, fmt.Errorf("reading the audit log: %w", err)
		}
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	res.analyze(rec)
	return res, nil
}

// driveResizes changes the worker replicas of random jobs at res.p.rate per
// second. It picks among the jobs that have settled, so that every resize
// can be measured on its own; only when none has settled does it pick any
// job, and then the two resizes of that job are left out of the statistics.
func driveResizes(ctx context.Context, o *options, cl *cluster, rec *recorder, op *harness.Operator, names []string, res *latencyResult) error {
	rng := rand.New(rand.NewPCG(uint64(o.seed), uint64(o.seed)^0x9e3779b97f4a7c15))
	interval := time.Duration(float64(time.Second) / res.p.rate)
	next := time.Now()
	failures := 0
	for i := range res.p.resizes {
		if err := sleepCtx(ctx, op, time.Until(next)); err != nil {
			return err
		}
		next = next.Add(interval)

		rec.mu.Lock()
		var pool []*jobRec
		for _, n := range names {
			if j := rec.jobs[n]; j.idle() {
				pool = append(pool, j)
			}
		}
		overlapping := false
		if len(pool) == 0 {
			overlapping = true
			for _, n := range names {
				pool = append(pool, rec.jobs[n])
			}
		}
		j := pool[rng.IntN(len(pool))]
		from := len(j.LiveWorkers())
		var choices []int
		for v := o.minWorkers; v <= o.maxWorkers; v++ {
			if v != from && v != j.desired {
				choices = append(choices, v)
			}
		}
		to := choices[rng.IntN(len(choices))]
		if j.cur != nil && j.cur.settledAt.IsZero() {
			j.cur.superseded = true
		}
		rz := &resizeRec{job: j, seq: i + 1, at: time.Now(), from: from, to: to, overlapping: overlapping}
		j.cur = rz
		j.desired = to
		res.resizes = append(res.resizes, rz)
		rec.mu.Unlock()

		if err := scaleJob(ctx, o, cl, res.p.namespace, j.Name, to); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			rec.mu.Lock()
			rz.err = err
			rec.mu.Unlock()
			logf("%s: %s failed: %v", res.p.scenario, rz, err)
			if failures++; failures > 5 {
				return fmt.Errorf("more than 5 resizes failed, the last: %w", err)
			}
		}
	}
	return nil
}

// analyze turns the records into the result's samples and checks.
func (res *latencyResult) analyze(rec *recorder) {
	res.anomalies = rec.anomalies()
	var jobs []*jobRec
	for _, j := range rec.jobs {
		jobs = append(jobs, j)
	}
	slices.SortFunc(jobs, func(a, b *jobRec) int { return strings.Compare(a.Name, b.Name) })
	for _, j := range jobs {
		res.jobListed = append(res.jobListed, j.listedAt.Sub(j.createdAt))
		for _, v := range j.Hosts {
			if !v.At.Before(res.start) && v.At.Before(res.settled) {
				res.hostChanges++
			}
		}
		for _, p := range j.AllWorkers() {
			res.createdWorkers++
			if !p.DeletingAt.IsZero() {
				res.deletedWorkers++
			}
			if !p.RunningAt.IsZero() && !p.ListedAt.IsZero() {
				d := p.ListedAt.Sub(p.RunningAt)
				if d < 0 {
					res.earlyListed++
					d = 0
				}
				res.discovery = append(res.discovery, d)
				if j.initialWorkers[p] {
					res.discoveryInitial = append(res.discoveryInitial, d)
				} else {
					res.discoveryResize = append(res.discoveryResize, d)
				}
			}
			if !p.RunningAt.IsZero() && p.ListedAt.IsZero() && p.DrainingAt.IsZero() && p.DeletingAt.IsZero() && !p.Finished {
				res.neverListed = append(res.neverListed, p.Name)
			}
		}
		// v1: the Role must allow a worker before the worker exists;
		// v2beta1: its name must resolve before it is listed.
		res.unreachable = append(res.unreachable, rec.hist.Unreachable(j.JobHistory)...)
		if rec.hist.API.ReachBySlices {
			resolve, listed := j.resolveTimes()
			res.resolve = append(res.resolve, resolve...)
			res.resolvedListed = append(res.resolvedListed, listed...)
		}
	}
	for _, rz := range res.resizes {
		switch {
		case rz.err != nil:
			res.failedResizes++
			continue
		case rz.excluded():
			res.excluded++
			continue
		case rz.settledAt.IsZero():
			res.unsettled = append(res.unsettled, rz)
		default:
			res.settle = append(res.settle, rz.settledAt.Sub(rz.at))
		}
		if rz.grow() {
			if !rz.reachAt.IsZero() {
				res.growReach = append(res.growReach, rz.reachAt.Sub(rz.at))
			}
			if !rz.podsAt.IsZero() {
				res.growPods = append(res.growPods, rz.podsAt.Sub(rz.at))
			}
		} else {
			res.victims += len(rz.victims)
			if !rz.goneAt.IsZero() {
				res.shrink = append(res.shrink, rz.goneAt.Sub(rz.at))
			}
		}
	}
	res.restEvents = map[string]int{}
	for _, e := range rec.events {
		if !e.t.Before(res.restFrom) && e.t.Before(res.restTo) {
			res.restEvents[e.kind]++
		}
	}
}

// describe says what an unsettled resize still lacks.
func (rz *resizeRec) describe() string {
	j := rz.job
	var missing []string
	if rz.grow() {
		if n := len(rz.newPods); n < rz.to-rz.from {
			missing = append(missing, fmt.Sprintf("%d of %d new workers created", n, rz.to-rz.from))
		} else if rz.reachAt.IsZero() {
			missing = append(missing, "not every new worker is reachable (Role or EndpointSlice)")
		}
	} else {
		if n := len(rz.victims); n < rz.from-rz.to {
			missing = append(missing, fmt.Sprintf("%d of %d victims marked draining", n, rz.from-rz.to))
		} else if rz.goneAt.IsZero() {
			missing = append(missing, "victims still listed")
		}
	}
	live, running := 0, 0
	for _, p := range j.LiveWorkers() {
		live++
		if !p.RunningAt.IsZero() {
			running++
		}
	}
	listed := 0
	if h := j.CurrentHosts(); h != nil {
		listed = len(h.Hosts)
	}
	missing = append(missing, fmt.Sprintf("now %d live workers, %d Running, %d listed", live, running, listed))
	return fmt.Sprintf("%s: %s", rz, strings.Join(missing, "; "))
}
