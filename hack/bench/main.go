// Command bench measures the operator against its design targets on a
// local control plane (hack/cluster-up.sh: real etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler, kwok nodes) and prints a
// markdown table. See hack/bench/README.md.
//
//	make build && go run ./hack/bench
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

const (
	scenarioLatency = "latency"
	scenarioMemory  = "memory"
)

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

type options struct {
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

	memPods, memWorkersPerJob int
	memTimeout, memRestart    time.Duration

	kwokNodes, kwokNodePods int
	operatorArgs            stringList
	operatorEnv             stringList
}

func (o *options) runs(s string) bool { return slices.Contains(o.scenarios, s) }

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var scenarios string
	fs.StringVar(&o.root, "root", "", "repository root (default: found from the working directory)")
	fs.StringVar(&o.localDir, "local-dir", "", "directory of the bench's cluster, logs and report (default <root>/_output/bench)")
	fs.StringVar(&o.operatorBin, "operator", "", "operator binary (default <root>/_output/bin/mpi-operator, from `make build`)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "admin kubeconfig of an existing cluster to use instead of starting one")
	fs.StringVar(&o.auditLog, "audit-log", "", "with --kubeconfig: the API server's audit log, written with the policy the bench writes to <local-dir>/audit-policy.yaml")
	fs.StringVar(&o.kubectl, "kubectl", "", "with --kubeconfig: kubectl to install the CRD with (default: the pinned one of hack/testbin.sh)")
	fs.BoolVar(&o.keepCluster, "keep-cluster", false, "leave the cluster the bench started running")
	fs.StringVar(&scenarios, "scenarios", scenarioLatency+","+scenarioMemory, "scenarios to run: latency, memory, or both")
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
	for _, s := range strings.Split(scenarios, ",") {
		s = strings.TrimSpace(s)
		if s != scenarioLatency && s != scenarioMemory {
			return nil, fmt.Errorf("unknown scenario %q", s)
		}
		o.scenarios = append(o.scenarios, s)
	}
	var errs []error
	if o.jobs < 1 || o.workers < 1 || o.resizes < 0 || o.rate <= 0 {
		errs = append(errs, errors.New("--jobs and --workers must be at least 1, --resizes at least 0, --rate above 0"))
	}
	if o.minWorkers < 1 || o.maxWorkers < o.minWorkers+2 || o.workers < o.minWorkers || o.workers > o.maxWorkers {
		errs = append(errs, errors.New("need 1 <= --min-workers <= --workers <= --max-workers and --max-workers >= --min-workers + 2"))
	}
	if o.drainSeconds < 0 || o.memPods < 1 || o.memWorkersPerJob < 1 || o.kwokNodePods < 1 {
		errs = append(errs, errors.New("--drain-seconds must be at least 0; --pods, --pods-per-job and --kwok-node-pods at least 1"))
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
	var err error
	if o.root == "" {
		if o.root, err = findRoot(); err != nil {
			return nil, err
		}
	}
	if o.root, err = filepath.Abs(o.root); err != nil {
		return nil, err
	}
	if o.localDir == "" {
		o.localDir = filepath.Join(o.root, "_output", "bench")
	}
	if o.localDir, err = filepath.Abs(o.localDir); err != nil {
		return nil, err
	}
	if o.operatorBin == "" {
		o.operatorBin = filepath.Join(o.root, "_output", "bin", "mpi-operator")
	}
	if o.operatorBin, err = filepath.Abs(o.operatorBin); err != nil {
		return nil, err
	}
	if o.out == "" {
		o.out = filepath.Join(o.localDir, "report.md")
	}
	return o, nil
}

// findRoot walks up from the working directory to this module's go.mod.
func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.Contains(string(b), "module github.com/kubeflow/mpi-operator\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the mpi-operator repository; pass --root")
		}
		dir = parent
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[bench %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	os.Exit(run(ctx, o))
}

// Exit codes.
const (
	exitOK         = 0
	exitIncomplete = 1 // the run could not complete
	exitChecks     = 3 // it completed, and some check failed
)

func run(ctx context.Context, o *options) int {
	started := time.Now()
	if fi, err := os.Stat(o.operatorBin); err != nil || fi.IsDir() {
		logf("no operator binary at %s: run `make build` first, or pass --operator", o.operatorBin)
		return exitIncomplete
	}
	rep := &report{o: o, started: started, machine: machine(), operatorVersion: binaryVersion(ctx, o.operatorBin),
		operatorDefaults: binaryDefaults(ctx, o.operatorBin),
		loadStart:        loadAverage()}

	var cl *cluster
	var err error
	if o.kubeconfig != "" {
		cl, err = useCluster(ctx, o)
	} else {
		cl, err = startCluster(ctx, o)
	}
	defer cl.stop(o.keepCluster)
	if err == nil {
		rep.cluster = cl.params
		logf("installing the CRD and the operator's RBAC; the operator runs as %s", operatorUser)
		err = cl.installOperator(ctx)
	}
	if err == nil && o.runs(scenarioLatency) {
		rep.latency, err = runLatency(ctx, o, cl)
		if err != nil {
			err = fmt.Errorf("latency scenario: %w", err)
		}
	}
	if err == nil && o.runs(scenarioMemory) {
		rep.memory, err = runMemory(ctx, o, cl)
		if err != nil {
			err = fmt.Errorf("memory scenario: %w", err)
		}
	}
	rep.duration = time.Since(started)
	text := rep.String()
	fmt.Print(text)
	if werr := os.WriteFile(o.out, []byte(text), 0o644); werr != nil {
		logf("writing %s: %v", o.out, werr)
	} else {
		logf("report written to %s (%s in all)", o.out, rep.duration.Round(time.Second))
	}
	if err != nil {
		logf("the run did not complete: %v", err)
		return exitIncomplete
	}
	if fails := rep.failedChecks(); len(fails) > 0 {
		logf("failed checks: %s", strings.Join(fails, "; "))
		return exitChecks
	}
	return exitOK
}

// machine describes the host: CPUs, model, memory.
func machine() string {
	model := ""
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				var kb int64
				if _, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kb); err == nil {
					mem = fmt.Sprintf(", %.0f GiB RAM", float64(kb)/(1<<20))
				}
			}
		}
	}
	s := fmt.Sprintf("nproc %d", runtime.NumCPU())
	if model != "" {
		s += " (" + model + ")"
	}
	return s + mem + ", " + runtime.GOOS + "/" + runtime.GOARCH
}

func binaryVersion(ctx context.Context, bin string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return strings.Join(strings.Fields(string(out)), " ")
}

// binaryDefaults reads, from the binary's own --help, the defaults of the
// flags that shape its load on the API server, so that the report states
// what ran rather than what the harness assumes.
func binaryDefaults(ctx context.Context, bin string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--help").CombinedOutput()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	var parts []string
	for _, name := range []string{"kube-api-qps", "kube-api-burst", "threadiness", "leader-elect"} {
		for _, line := range strings.Split(string(out), "\n") {
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

// loadAverage is the first three fields of /proc/loadavg: other work on
// the machine slows every component down.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], ", ")
}
