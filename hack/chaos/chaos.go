package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// killRec is one SIGKILL of the leading replica.
type killRec struct {
	seq    int
	run    *opRun // the leader killed
	at     time.Time
	ledFor time.Duration // how long it had held the Lease
	by     *opRun        // the replica that took over, nil if none did
	// takeover is from the kill to the new holder's acquireTime.
	takeover time.Duration
	err      error
}

// result is everything the run did and found.
type result struct {
	cluster     string
	startSettle time.Duration // jobs created -> all settled
	ops         []*scaleOp
	desired     map[string]int // the replicas the harness last set, by job
	kills       []killRec
	restarts    []harness.APIServerRestart
	refusals    []refusal
	// refusedEvents are the jobs' events that carry a refused write.
	refusedEvents int
	// webhookDelays are the delays the slow webhook gave pod creations.
	webhookDelays harness.Sample
	runs          []*opRun
	exits         []exitRec
	chaosFrom     time.Time
	// lastFault is when the last fault ended: the standby held the Lease,
	// or the API server was ready.
	lastFault time.Time
	// settled: every job settled within the timeout, settleTime after the
	// last fault.
	settled    bool
	settleTime time.Duration
	// restChanges are the changes seen in the rest window.
	restChanges int
	checks      *finalChecks
	logs        logReport
	// watchLost are writes the etcd watch could not read (the history
	// checks are then incomplete); watchResumed its streams that broke and
	// were resumed after their last revision.
	watchLost, watchResumed []string
}

func runChaos(ctx context.Context, o *options) (*result, error) {
	res := &result{}
	if err := os.MkdirAll(o.localDir, 0o755); err != nil {
		return res, err
	}
	// Operator logs of an earlier run would pass for this one's.
	old, err := filepath.Glob(filepath.Join(o.localDir, "operator-*.log"))
	if err != nil {
		return res, err
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return res, err
		}
	}
	// The harness's own client-go logs (watch errors while the API server
	// restarts) go to a file, not the progress on stderr.
	klogFile, err := os.Create(filepath.Join(o.localDir, "harness-client.log"))
	if err != nil {
		return res, err
	}
	defer klogFile.Close()
	klog.LogToStderr(false)
	klog.SetOutput(klogFile)
	tl, err := newTimeline(filepath.Join(o.localDir, "timeline.log"))
	if err != nil {
		return res, err
	}
	defer tl.close()

	nodes := kwokNodes(o)
	settings := append([]string{},
		fmt.Sprintf("KWOK_NODES=%d", nodes),
		fmt.Sprintf("KWOK_NODE_PODS=%d", kwokPerNode),
		"CLUSTER_UP_TIMEOUT=300",
		// On SIGTERM the API server stops listening at once, but waits for
		// open watches until its 60 s shutdown timeout unless told to end
		// them sooner.
		"APISERVER_EXTRA_ARGS=--shutdown-watch-termination-grace-period=5s",
		// Neither garbage collection nor binding should be what the
		// operator waits for.
		"CONTROLLER_MANAGER_EXTRA_ARGS=--kube-api-qps=200 --kube-api-burst=400",
		"SCHEDULER_EXTRA_ARGS=--kube-api-qps=200 --kube-api-burst=400",
	)
	res.cluster = fmt.Sprintf("fresh local control plane (hack/cluster-up.sh) in %s: %d kwok nodes x %d pods", o.localDir, nodes, kwokPerNode)
	logf("starting the cluster: %d kwok nodes (hack/cluster-up.sh)", nodes)
	cl, err := harness.StartCluster(ctx, o.root, o.localDir, userAgent, settings, logf)
	defer cl.Stop(o.keepCluster)
	if err != nil {
		return res, err
	}
	logf("installing the CRD and the operator's RBAC; the operator runs as %s", harness.OperatorUser)
	if err := cl.InstallOperator(ctx, harness.V1, rbacName); err != nil {
		return res, err
	}
	if err := cl.EnsureNamespace(ctx, namespace); err != nil {
		return res, err
	}
	rec := newRecorder(tl)
	watch, err := harness.WatchEtcd(ctx, "http://127.0.0.1:"+cl.Setting("ETCD_PORT"), namespace, rec.observe)
	if err != nil {
		return res, fmt.Errorf("watching etcd: %w", err)
	}
	defer watch.Stop()

	ports, err := harness.FreePorts(len(operatorPorts))
	if err != nil {
		return res, err
	}
	copy(operatorPorts[:], ports)
	f := startFleet(ctx, o, cl, tl)
	defer func() {
		f.stop()
		res.runs, res.exits = f.runs, f.exits
	}()
	logf("two operator replicas started (monitoring ports %d, %d); waiting for a leader", operatorPorts[0], operatorPorts[1])
	if err := waitFor(ctx, 3*time.Minute, func() bool { return f.both() && f.leader() != nil }); err != nil {
		return res, fmt.Errorf("waiting for two replicas and a leader: %w", err)
	}

	// The jobs.
	jobRng := rand.New(rand.NewPCG(uint64(o.seed), 3))
	drv := &opDriver{o: o, mpi: cl.MPI, dyn: cl.Dynamic, tl: tl, rng: rand.New(rand.NewPCG(uint64(o.seed), 2)), desired: map[string]int{},
		killsLeft: o.kills, cycle: expectedCycle(o), cycleStart: time.Now()}
	created := time.Now()
	for i := range o.jobs {
		name := jobName(i)
		workers := o.minWorkers + jobRng.IntN(o.maxWorkers-o.minWorkers+1)
		rec.addJob(name)
		drv.desired[name] = workers
		job := newJob(name, workers, o.minWorkers, o.maxWorkers, drainChoices[i%len(drainChoices)])
		if _, err := cl.MPI.KubeflowV1().MPIJobs(namespace).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			return res, fmt.Errorf("creating MPIJob %s: %w", name, err)
		}
		tl.printf("created %s with %d workers, drainSeconds %d", name, workers, *job.Spec.ElasticPolicy.DrainSeconds)
	}
	logf("created %d jobs; waiting for them to settle", o.jobs)
	states, err := waitSettled(ctx, cl, drv.desired, o.settleTimeout)
	if err != nil {
		return res, fmt.Errorf("the jobs did not settle after their creation: %w; %s", err, unsettledSummary(states))
	}
	res.startSettle = time.Since(created)
	logf("all %d jobs settled in %s", o.jobs, res.startSettle.Round(100*time.Millisecond))

	// The chaos.
	if o.webhookDelay > 0 {
		hook, err := startSlowWebhook(ctx, cl.Kube, o.webhookDelay, o.seed)
		if err != nil {
			return res, err
		}
		logf("a webhook holds each pod creation for up to %s", o.webhookDelay)
		defer func() {
			res.webhookDelays = hook.calls()
			_ = hook.unregister(context.Background(), cl.Kube)
			hook.stop()
		}()
	}
	res.chaosFrom = time.Now()
	opsCtx, stopOps := context.WithCancel(ctx)
	defer stopOps()
	go drv.run(opsCtx)
	err = killLoop(ctx, o, cl, f, drv, tl, res)
	res.ops, res.desired = drv.snapshot()
	if err != nil {
		return res, err
	}
	logf("chaos done: %d operations, %d kills, %d API server restarts; waiting for the jobs to settle",
		len(res.ops), len(res.kills), len(res.restarts))
	tl.printf("chaos done; last fault at %s", res.lastFault.Format("15:04:05.000"))

	// Settling, and rest.
	states, err = waitSettled(ctx, cl, res.desired, o.settleTimeout)
	switch {
	case err == nil:
		res.settled = true
		res.settleTime = time.Since(res.lastFault)
		logf("every job settled, %s after the last fault", res.settleTime.Round(100*time.Millisecond))
		var before int
		rec.with(func(*harness.History) { before = rec.changes })
		if err := sleepCtx(ctx, o.restWindow); err != nil {
			return res, err
		}
		rec.with(func(*harness.History) { res.restChanges = rec.changes - before })
	case ctx.Err() != nil:
		return res, err
	default:
		logf("some jobs did not settle within %s: %s", o.settleTimeout, unsettledSummary(states))
	}

	// The checks, with both replicas still running; then their logs.
	res.checks, err = runChecks(ctx, cl, rec, res.desired, o)
	if err != nil {
		return res, err
	}
	if res.refusedEvents, err = countRefusedEvents(ctx, cl.Kube); err != nil {
		return res, err
	}
	res.watchLost, res.watchResumed = watch.Stop()
	f.stop()
	res.runs, res.exits = f.runs, f.exits
	res.logs = classifyLogs(f.logs(), res.restarts)
	return res, nil
}

// killLoop SIGKILLs the leader o.kills times at random moments, restarting
// the API server in between, and checks each time that the standby takes
// over. The scale operations are paced to end before the last kill; it
// waits for any left.
func killLoop(ctx context.Context, o *options, cl *harness.Cluster, f *fleet, drv *opDriver, tl *timeline, res *result) error {
	rng := rand.New(rand.NewPCG(uint64(o.seed), 1))
	restartBefore := map[int]bool{}
	for i := range o.apiRestarts {
		restartBefore[(i+1)*o.kills/(o.apiRestarts+1)] = true
	}
	// Refusals start before the kills after the first, spread over the run,
	// and last across the kill: a new leader meets them too.
	refuseBefore := map[int]bool{}
	for i := range o.refusals {
		refuseBefore[min(1+i*o.kills/max(o.refusals, 1), o.kills-1)] = true
	}
	var refusing sync.WaitGroup
	var refusalsMu sync.Mutex
	defer func() {
		refusing.Wait()
		for _, r := range res.refusals {
			if r.to.After(res.lastFault) {
				res.lastFault = r.to
			}
		}
	}()
	var cycles harness.Sample
	cycleStart := time.Now()
	leaderReady := func() error {
		if err := waitFor(ctx, 3*time.Minute, func() bool { return f.both() && f.leader() != nil }); err != nil {
			return fmt.Errorf("waiting for a leader with a standby: %w", err)
		}
		return nil
	}
	for k := 0; k < o.kills; k++ {
		mean := expectedCycle(o)
		if len(cycles) > 0 {
			var sum time.Duration
			for _, c := range cycles {
				sum += c
			}
			mean = sum / time.Duration(len(cycles))
		}
		drv.progress(o.kills-k, mean, cycleStart)
		if err := leaderReady(); err != nil {
			return err
		}
		if restartBefore[k] {
			delete(restartBefore, k)
			if err := sleepCtx(ctx, time.Duration(rng.Int64N(int64(o.maxDwell)+1))); err != nil {
				return err
			}
			logf("restarting the kube-apiserver")
			tl.printf("apiserver: restarting")
			r, err := cl.RestartAPIServer(ctx, 60*time.Second, 5*time.Minute)
			res.restarts = append(res.restarts, r)
			res.lastFault = r.Ready
			if err != nil {
				tl.printf("apiserver: restart failed: %v", err)
				return fmt.Errorf("restarting the API server: %w", err)
			}
			tl.printf("apiserver: pid %d -> %d, exited after %s, ready %s after the SIGTERM", r.OldPID, r.NewPID,
				harness.FmtDur(r.Exited.Sub(r.Stopping)), harness.FmtDur(r.Downtime()))
			logf("kube-apiserver restarted: ready again %s after the SIGTERM", harness.FmtDur(r.Downtime()))
			if err := leaderReady(); err != nil {
				return err
			}
		}
		if refuseBefore[k] {
			delete(refuseBefore, k)
			hold := 3*time.Second + time.Duration(rng.Int64N(int64(o.maxDwell)+1))
			logf("refusing updates of the jobs' ConfigMaps for %s", harness.FmtDur(hold))
			tl.printf("refusal: ConfigMap updates refused for %s", harness.FmtDur(hold))
			refusing.Go(func() {
				r, err := refuseConfigMapUpdates(ctx, cl.Kube, hold, drv.scaleIn)
				if err != nil {
					tl.printf("refusal: %v", err)
				}
				tl.printf("refusal: ConfigMap updates accepted again")
				refusalsMu.Lock()
				res.refusals = append(res.refusals, r)
				refusalsMu.Unlock()
			})
		}
		lead := f.leader()
		if lead == nil {
			k--
			continue
		}
		if err := sleepCtx(ctx, time.Duration(rng.Int64N(int64(o.maxDwell)+1))); err != nil {
			return err
		}
		kr := killRec{seq: len(res.kills) + 1, run: lead}
		f.mu.Lock()
		if n := len(f.holders); n > 0 && !f.holders[n-1].acquired.IsZero() {
			kr.ledFor = time.Since(f.holders[n-1].acquired)
		}
		f.mu.Unlock()
		if lead != f.leader() || !f.kill(lead) {
			// It lost the Lease or exited on its own meanwhile.
			k--
			continue
		}
		kr.at = lead.ended
		tl.printf("kill %d: SIGKILL %s, leading for %s", kr.seq, lead, harness.FmtDur(kr.ledFor))
		by, at, err := f.takeover(ctx, lead, 2*time.Minute)
		if err != nil {
			kr.err = err
			tl.printf("kill %d: no takeover: %v", kr.seq, err)
			logf("kill %d: the standby did not take over: %v", kr.seq, err)
		} else {
			kr.by, kr.takeover = by, at.Sub(kr.at)
			tl.printf("kill %d: %s took over after %s", kr.seq, by, harness.FmtDur(kr.takeover))
		}
		res.kills = append(res.kills, kr)
		res.lastFault = kr.at
		if at.After(kr.at) {
			res.lastFault = at
		}
		logf("kill %d/%d: %s killed after leading %s; takeover %s; %d operations sent", kr.seq, o.kills, lead,
			harness.FmtDur(kr.ledFor), harness.FmtDur(kr.takeover), drv.sent())
		f.restartSlot(lead.slot)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		cycles = append(cycles, time.Since(cycleStart))
		cycleStart = time.Now()
	}
	drv.progress(0, 0, cycleStart)
	if err := waitFor(ctx, 10*time.Minute, drv.finished); err != nil {
		return fmt.Errorf("waiting for the last scale operations: %w", err)
	}
	return leaderReady()
}

// expectedCycle is a first guess of the time from one kill to the next: the
// Lease's 20 s duration, a poll of the standby, the random dwell.
func expectedCycle(o *options) time.Duration {
	return 25*time.Second + o.maxDwell/2
}
