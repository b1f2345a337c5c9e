// Command bench measures the operator against its design targets on a
// local control plane (hack/cluster-up.sh: real etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler, kwok nodes) and prints a
// markdown table. See hack/bench/README.md.
//
//	make build && go run ./hack/bench
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"

	"github.com/kubeflow/mpi-operator/test/harness"
)

const (
	scenarioLatency = "latency"
	scenarioLoad    = "load"
	scenarioMemory  = "memory"
	scenarioBigJob  = "bigjob"
)

// scenarioOrder is the order the scenarios run in, whatever the order of
// --scenarios: the memory scenario last, so that it can delete what the
// others left and measure the operator with its own pods only.
var scenarioOrder = []string{scenarioLatency, scenarioLoad, scenarioBigJob, scenarioMemory}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

type options struct {
	api         harness.API
	root        string
	localDir    string
	operatorBin string
	kubeconfig  string
	auditLog    string
	kubectl     string
	keepCluster bool
	scenarios   []string
	out         string

	jobs, workers, resizes int
	rate                   float64
	minWorkers, maxWorkers int
	drainSeconds           int
	settleTimeout          time.Duration
	restWindow, restGrace  time.Duration
	seed                   int64

	loadJobs, loadResizes int
	loadRate              float64

	memPods, memWorkersPerJob int
	memTimeout, memRestart    time.Duration

	bigWorkers, bigStep int
	bigTimeout          time.Duration

	kwokNodes, kwokNodePods int
	operatorArgs            stringList
	operatorEnv             stringList
}

func (o *options) runs(s string) bool { return slices.Contains(o.scenarios, s) }

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var scenarios, api string
	fs.StringVar(&api, "api", harness.V1.Version, "MPIJob version, and so the operator, to measure: v1 (mpi-operator) or v2beta1 (mpi-operator-v2)")
	fs.StringVar(&o.root, "root", "", "repository root (default: found from the working directory)")
	fs.StringVar(&o.localDir, "local-dir", "", "directory of the bench's cluster, logs and report (default <root>/_output/bench)")
	fs.StringVar(&o.operatorBin, "operator", "", "operator binary (default <root>/_output/bin/mpi-operator, or mpi-operator-v2 with --api v2beta1, from `make build`)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "admin kubeconfig of an existing cluster to use instead of starting one")
	fs.StringVar(&o.auditLog, "audit-log", "", "with --kubeconfig: the API server's audit log, written with the policy the bench writes to <local-dir>/audit-policy.yaml")
	fs.StringVar(&o.kubectl, "kubectl", "", "with --kubeconfig: kubectl to install the CRD with (default: the pinned one of hack/testbin.sh)")
	fs.BoolVar(&o.keepCluster, "keep-cluster", false, "leave the cluster the bench started running")
	fs.StringVar(&scenarios, "scenarios", strings.Join(scenarioOrder, ","), "comma-separated scenarios to run, of latency, load, bigjob, memory (they run in that order)")
	fs.StringVar(&o.out, "out", "", "also write the report to this file (default <local-dir>/report.md)")
	fs.IntVar(&o.jobs, "jobs", 50, "latency: elastic MPIJobs")
	fs.IntVar(&o.workers, "workers", 2, "latency: initial workers per job")
	fs.IntVar(&o.resizes, "resizes", 100, "latency: worker replica changes")
	fs.Float64Var(&o.rate, "rate", 4, "latency: replica changes per second")
	fs.IntVar(&o.minWorkers, "min-workers", 1, "latency: fewest workers a resize asks for (the jobs' elasticPolicy.minReplicas)")
	fs.IntVar(&o.maxWorkers, "max-workers", 6, "latency: most workers a resize asks for (the jobs' elasticPolicy.maxReplicas)")
	fs.IntVar(&o.drainSeconds, "drain-seconds", 2, "latency: the jobs' elasticPolicy.drainSeconds")
	fs.DurationVar(&o.settleTimeout, "settle-timeout", 3*time.Minute, "latency: how long to wait for the jobs, and then for the resizes, to settle")
	fs.DurationVar(&o.restWindow, "rest", 60*time.Second, "latency: window in which the operator's API requests at rest are counted")
	fs.DurationVar(&o.restGrace, "rest-grace", 5*time.Second, "latency: wait between settling and the at-rest window")
	fs.Int64Var(&o.seed, "seed", 0, "latency: random seed of the resizes (0: from the clock)")
	fs.IntVar(&o.loadJobs, "load-jobs", 200, "load: elastic MPIJobs (of --workers workers, as the latency scenario's)")
	fs.IntVar(&o.loadResizes, "load-resizes", 400, "load: worker replica changes")
	fs.Float64Var(&o.loadRate, "load-rate", 16, "load: replica changes per second")
	fs.IntVar(&o.bigWorkers, "big-workers", bigDefaultWorkers, fmt.Sprintf("bigjob: workers the one elastic MPIJob is created with (at most %d, the most workers of a job)", kubeflow.MaxWorkers))
	fs.IntVar(&o.bigStep, "big-step", bigDefaultStep, "bigjob: workers removed by the shrink, then added back by the growth (fewer than --big-workers)")
	fs.DurationVar(&o.bigTimeout, "big-timeout", 10*time.Minute, "bigjob: how long to wait for each step to settle")
	fs.IntVar(&o.memPods, "pods", 10000, "memory: worker pods in all")
	fs.IntVar(&o.memWorkersPerJob, "pods-per-job", 100, "memory: worker pods per MPIJob")
	fs.DurationVar(&o.memTimeout, "memory-timeout", 20*time.Minute, "memory: how long to wait for every worker to be listed")
	fs.DurationVar(&o.memRestart, "restart-watch", 60*time.Second, "memory: how long to watch a restarted operator (0: no restart)")
	fs.IntVar(&o.kwokNodes, "kwok-nodes", 0, "kwok nodes of the bench's cluster (0: enough for the scenarios)")
	fs.IntVar(&o.kwokNodePods, "kwok-node-pods", 250, "pods per kwok node")
	fs.Var(&o.operatorArgs, "operator-arg", "extra operator flag, e.g. --operator-arg=--kube-api-qps=5 (repeatable; default: the operator's defaults)")
	fs.Var(&o.operatorEnv, "operator-env", "extra environment variable of the operator only, e.g. --operator-env=GOMEMLIMIT=64MiB (repeatable)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var ok bool
	if o.api, ok = harness.APIByVersion(api); !ok {
		return nil, fmt.Errorf("unknown --api %q: v1 or v2beta1", api)
	}
	var errs []error
	for _, s := range strings.Split(scenarios, ",") {
		s = strings.TrimSpace(s)
		switch {
		case s == "":
		case !slices.Contains(scenarioOrder, s):
			errs = append(errs, fmt.Errorf("unknown scenario %q: the scenarios are %s", s, strings.Join(scenarioOrder, ", ")))
		case !o.runs(s):
			o.scenarios = append(o.scenarios, s)
		}
	}
	if len(o.scenarios) == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("--scenarios names no scenario"))
	}
	if o.jobs < 1 || o.workers < 1 || o.resizes < 0 || o.rate <= 0 {
		errs = append(errs, errors.New("--jobs and --workers must be at least 1, --resizes at least 0, --rate above 0"))
	}
	if o.minWorkers < 1 || o.maxWorkers < o.minWorkers+2 || o.workers < o.minWorkers || o.workers > o.maxWorkers {
		errs = append(errs, errors.New("need 1 <= --min-workers <= --workers <= --max-workers and --max-workers >= --min-workers + 2"))
	}
	if o.drainSeconds < 0 || o.memPods < 1 || o.memWorkersPerJob < 1 || o.kwokNodePods < 1 {
		errs = append(errs, errors.New("--drain-seconds must be at least 0; --pods, --pods-per-job and --kwok-node-pods at least 1"))
	}
	if o.loadJobs < 1 || o.loadResizes < 0 || o.loadRate <= 0 {
		errs = append(errs, errors.New("--load-jobs must be at least 1, --load-resizes at least 0, --load-rate above 0"))
	}
	if o.bigWorkers < 1 || o.bigStep < 1 || o.bigTimeout <= 0 {
		errs = append(errs, errors.New("--big-workers and --big-step must be at least 1, --big-timeout above 0"))
	} else if o.bigWorkers > int(kubeflow.MaxWorkers) || o.bigStep >= o.bigWorkers {
		errs = append(errs, fmt.Errorf("need --big-step < --big-workers <= %d (the most workers of an MPIJob)", kubeflow.MaxWorkers))
	}
	for _, kv := range o.operatorEnv {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			errs = append(errs, fmt.Errorf("--operator-env %q is not KEY=VALUE", kv))
		}
	}
	if o.auditLog != "" && o.kubeconfig == "" {
		errs = append(errs, errors.New("--audit-log goes with --kubeconfig"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if o.seed == 0 {
		o.seed = time.Now().UnixNano() % 1_000_000
	}
	binGiven := o.operatorBin != ""
	if err := harness.ResolvePaths("bench", &o.root, &o.localDir, &o.operatorBin, &o.out); err != nil {
		return nil, err
	}
	if !binGiven {
		o.operatorBin = filepath.Join(o.root, o.api.Binary)
	}
	return o, nil
}

var logf = harness.NewLogf("bench")

func main() { harness.Main("bench", parseFlags, run) }

func run(ctx context.Context, o *options) int {
	info, err := harness.StartRun(ctx, o.operatorBin)
	if err != nil {
		logf("%v", err)
		return harness.ExitIncomplete
	}
	rep := &report{o: o, RunInfo: info, operatorDefaults: binaryDefaults(ctx, o.operatorBin)}

	var cl *cluster
	if o.kubeconfig != "" {
		cl, err = useCluster(ctx, o)
	} else {
		cl, err = startCluster(ctx, o)
	}
	defer cl.stop(o.keepCluster)
	if err == nil {
		rep.cluster = cl.params
		logf("installing the %s CRD and the operator's RBAC; the operator runs as %s", o.api.Version, operatorUser)
		err = cl.InstallOperator(ctx, o.api, benchRBACName)
	}
	for _, s := range scenarioOrder {
		if err != nil || !o.runs(s) {
			continue
		}
		logf("scenario %s", s)
		switch s {
		case scenarioLatency:
			rep.latency, err = runLatency(ctx, o, cl, o.latencyParams())
		case scenarioLoad:
			rep.load, err = runLatency(ctx, o, cl, o.loadParams())
		case scenarioBigJob:
			rep.bigjob, err = runBigJob(ctx, o, cl)
		case scenarioMemory:
			rep.memory, err = runMemory(ctx, o, cl)
		}
		if err != nil {
			err = fmt.Errorf("%s scenario: %w", s, err)
		}
	}
	rep.Duration = time.Since(rep.Started)
	return harness.Finish(logf, rep.String(), o.out, rep.RunInfo, err, rep.failedChecks())
}

// binaryDefaults reads, from the binary's own --help, the defaults of the
// flags that shape its load on the API server, so that the report states
// what ran rather than what the harness assumes.
func binaryDefaults(ctx context.Context, bin string) string {
	out, err := harness.BinaryOutput(ctx, bin, "--help")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	var parts []string
	for _, name := range []string{"kube-api-qps", "kube-api-burst", "threadiness", "leader-elect"} {
		for _, line := range strings.Split(out, "\n") {
			if !strings.Contains(line, "--"+name+" ") {
				continue
			}
			if _, def, ok := strings.Cut(line, "(default "); ok {
				parts = append(parts, fmt.Sprintf("--%s=%s", name, strings.TrimSuffix(strings.TrimSpace(def), ")")))
			}
		}
	}
	return strings.Join(parts, " ")
}
