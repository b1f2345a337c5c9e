// Command chaos checks that the operator is crash-safe on a local control
// plane (hack/cluster-up.sh: real etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler, kwok nodes): elastic MPIJobs
// are scaled at random while the leading operator replica is SIGKILLed and
// the API server restarted, and once everything has settled every job must
// have exactly its workers, with nothing duplicated, orphaned, deleted while
// listed, or exec-able beyond them. It prints a markdown table. See
// hack/chaos/README.md.
//
//	make build && go run ./hack/chaos
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// operatorPorts are the monitoring ports of the two operator replicas,
// free ports picked at the start (each replica keeps its port across its
// restarts).
var operatorPorts [2]int

const (
	namespace   = "mpi-chaos"
	rbacName    = "mpi-operator-chaos"
	userAgent   = "mpi-operator-chaos"
	kwokPerNode = 110
)

type options struct {
	root, localDir, operatorBin, out string
	keepCluster, short               bool

	jobs, ops, kills, apiRestarts int
	// refusals are windows of refused ConfigMap updates; webhookDelay the
	// most a webhook holds each pod creation (0: no webhook).
	refusals               int
	webhookDelay           time.Duration
	minWorkers, maxWorkers int
	seed                   int64
	maxDwell               time.Duration
	settleTimeout          time.Duration
	restWindow             time.Duration
}

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.StringVar(&o.root, "root", "", "repository root (default: found from the working directory)")
	fs.StringVar(&o.localDir, "local-dir", "", "directory of the chaos cluster, logs, timeline and report (default <root>/_output/chaos)")
	fs.StringVar(&o.operatorBin, "operator", "", "operator binary (default <root>/_output/bin/mpi-operator, from `make build`)")
	fs.StringVar(&o.out, "out", "", "also write the report to this file (default <local-dir>/report.md)")
	fs.BoolVar(&o.keepCluster, "keep-cluster", false, "leave the cluster running at the end")
	fs.BoolVar(&o.short, "short", false, "a shorter run for CI: 5 jobs, 40 operations, 5 kills, 1 API server restart (flags given explicitly win)")
	fs.IntVar(&o.jobs, "jobs", 20, "elastic MPIJobs")
	fs.IntVar(&o.ops, "ops", 200, "scale operations, through the scale subresource and through spec edits")
	fs.IntVar(&o.kills, "kills", 20, "SIGKILLs of the leading operator replica")
	fs.IntVar(&o.apiRestarts, "apiserver-restarts", 2, "restarts of the kube-apiserver during the run")
	fs.IntVar(&o.refusals, "refusals", 3, "windows in which the API server refuses every update of the jobs' ConfigMaps, each up to --max-dwell long and overlapping a kill of the leader")
	fs.DurationVar(&o.webhookDelay, "webhook-delay", 2*time.Second, "a validating webhook holds each pod creation for a random time up to this, through the chaos (0: no webhook)")
	fs.IntVar(&o.minWorkers, "min-workers", 1, "the jobs' elasticPolicy.minReplicas")
	fs.IntVar(&o.maxWorkers, "max-workers", 6, "the jobs' elasticPolicy.maxReplicas")
	fs.Int64Var(&o.seed, "seed", 0, "random seed of every choice (0: from the clock)")
	fs.DurationVar(&o.maxDwell, "max-dwell", 12*time.Second, "longest a leader runs before it is killed (uniform from 0)")
	fs.DurationVar(&o.settleTimeout, "settle-timeout", 5*time.Minute, "how long the jobs may take to settle, at the start and after the last fault")
	fs.DurationVar(&o.restWindow, "rest", 15*time.Second, "window after settling in which no worker, discover_hosts.sh or Role may change")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.short {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, v := range map[string]*int{"jobs": &o.jobs, "ops": &o.ops, "kills": &o.kills, "apiserver-restarts": &o.apiRestarts, "refusals": &o.refusals} {
			if !set[name] {
				*v = map[string]int{"jobs": 5, "ops": 40, "kills": 5, "apiserver-restarts": 1, "refusals": 2}[name]
			}
		}
	}
	var errs []error
	if o.jobs < 1 || o.ops < 0 || o.kills < 1 || o.apiRestarts < 0 || o.refusals < 0 || o.refusals > o.kills || o.webhookDelay < 0 {
		errs = append(errs, errors.New("--jobs and --kills must be at least 1, --ops, --apiserver-restarts, --refusals and --webhook-delay at least 0, --refusals at most --kills"))
	}
	if o.minWorkers < 1 || o.maxWorkers <= o.minWorkers {
		errs = append(errs, errors.New("need 1 <= --min-workers < --max-workers"))
	}
	if o.maxDwell < 0 || o.settleTimeout <= 0 || o.restWindow < 0 {
		errs = append(errs, errors.New("--max-dwell and --rest must not be negative, --settle-timeout must be positive"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if o.seed == 0 {
		o.seed = time.Now().UnixNano() % 1_000_000
	}
	if err := harness.ResolvePaths("chaos", &o.root, &o.localDir, &o.operatorBin, &o.out); err != nil {
		return nil, err
	}
	return o, nil
}

var logf = harness.NewLogf("chaos")

func main() { harness.Main("chaos", parseFlags, run) }

func run(ctx context.Context, o *options) int {
	info, err := harness.StartRun(ctx, o.operatorBin)
	if err != nil {
		logf("%v", err)
		return harness.ExitIncomplete
	}
	logf("seed %d: %d jobs, %d scale operations, %d kills of the leader, %d API server restarts, %d windows of refused ConfigMap updates, pod creations held up to %s",
		o.seed, o.jobs, o.ops, o.kills, o.apiRestarts, o.refusals, o.webhookDelay)
	res, err := runChaos(ctx, o)
	rep := &report{RunInfo: info, o: o, res: res}
	rep.Duration = time.Since(rep.Started)
	status := harness.Finish(logf, rep.String(), o.out, rep.RunInfo, err, res.failedChecks())
	logf("seed %d", o.seed)
	return status
}

// kwokNodes is enough simulated nodes for every job at its most workers,
// with room for drained workers not yet deleted.
func kwokNodes(o *options) int {
	pods := o.jobs * (o.maxWorkers + 1)
	return max(2, (pods*3/2+kwokPerNode-1)/kwokPerNode)
}
