// Package plugin runs the kubectl-mpijob binary as a user would, with
// --kubeconfig, against a control plane of its own (hack/cluster-up.sh
// through test/harness: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and two kwok nodes of 8 GPUs each, kwok serving pods/log
// of the simulated pods and leaving the pods of batch Jobs running) with an
// operator binary running, and checks each command's output and exit code
// and what it did to the cluster.
//
// The tests run against the v1 operator (mpi-operator, kubeflow.org/v1)
// and, in TestV2beta1, against the v2 operator (mpi-operator-v2,
// kubeflow.org/v2beta1): useAPI swaps the CRD and the operator binary on the
// one cluster, once, as the tests run in order.
//
// Run it with `make test-plugin`, or after `make build`:
//
//	go test -count=1 -v ./test/plugin/
//
// KEEP_CLUSTER=1 leaves the cluster (not the operator) running;
// E2E_OPERATOR_BIN and E2E_OPERATOR_V2_BIN test other operator binaries.
package plugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// ns is the namespace the tests' jobs run in.
const ns = "plugin-e2e"

var env struct {
	*harness.Cluster
	plugin string // the kubectl-mpijob binary built for this run
}

// poll is how the tests wait.
var poll = harness.Poller{Every: 250 * time.Millisecond}

// The launcher of a v2beta1 job is a batch Job's pod: kwok's stock stages
// would complete it at once, and with it every job.
func TestMain(m *testing.M) {
	harness.Suite{Name: "plugin-e2e", Settings: []string{"KWOK_NODES=2", "KWOK_NODE_GPUS=8", "KWOK_JOB_PODS_COMPLETE=false"},
		KwokServer: true, SetUp: setUp}.Run(m)
}

// setUp builds the plugin, makes the tests' namespace and starts the v1
// operator with its CRD.
func setUp(c *harness.Cluster) (func(), error) {
	env.Cluster = c
	// The plugin as `go install` builds it, from this tree.
	env.plugin = filepath.Join(c.Dir, "kubectl-mpijob")
	build := exec.Command("go", "build", "-o", env.plugin, "./cmd/kubectl-mpijob")
	build.Dir = c.Root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the plugin: %w\n%s", err, out)
	}
	ctx := context.Background()
	// Workers need the namespace's default ServiceAccount.
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		return nil, err
	}
	return stopOperator, switchAPI(ctx, harness.V1)
}

// The MPIJob version the cluster serves now, and the operator that runs its
// jobs.
var (
	api      harness.API
	operator *harness.Operator
)

// The operator binary of each version, and its arguments: cluster admin,
// without leader election.
var operators = map[string]struct {
	env  string // the variable that names another binary
	args []string
}{
	harness.V1.Version:      {"E2E_OPERATOR_BIN", []string{"--leader-elect=false", "--kubectl-delivery-image=mpioperator/kubectl-delivery:e2e", "-v=2"}},
	harness.V2beta1.Version: {"E2E_OPERATOR_V2_BIN", []string{"--leader-elect=false", "-v=2"}},
}

// useAPI has the cluster serve the MPIJobs of a version and run them with
// its operator, swapping them when the cluster serves the other.
func useAPI(t *testing.T, a harness.API) {
	t.Helper()
	if api == a && operator != nil {
		return
	}
	start := time.Now()
	if err := switchAPI(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	t.Logf("the cluster serves kubeflow.org/%s, its operator running (switched in %s)", a.Version, time.Since(start).Round(time.Millisecond))
}

// switchAPI stops the running operator, deletes the MPIJob CRD (with any
// job left), applies the CRD of the version and starts its operator. The
// CRD is deleted rather than replaced: each version's CRD must list the
// versions stored before, which v1's does not for v2beta1.
func switchAPI(ctx context.Context, a harness.API) error {
	stopOperator()
	if err := env.KubectlRun(ctx, "delete", "crd", "mpijobs.kubeflow.org", "--ignore-not-found", "--wait=true"); err != nil {
		return err
	}
	// kubectl's discovery cache would still name the versions of the CRD
	// deleted.
	if err := os.RemoveAll(os.Getenv("KUBECACHEDIR")); err != nil {
		return err
	}
	if err := env.ApplyCRDs(ctx, false, filepath.Join(env.Root, a.Manifests, "crd.yaml")); err != nil {
		return err
	}
	run := operators[a.Version]
	bin, err := a.BinaryIn(env.Root, run.env)
	if err != nil {
		return err
	}
	op, err := harness.StartOperator(ctx, harness.OperatorConfig{Bin: bin, Kubeconfig: env.Kubeconfig,
		LogPath: filepath.Join(env.Dir, "operator-"+a.Version+".log"), Args: run.args})
	if err != nil {
		return err
	}
	api, operator = a, op
	return nil
}

func stopOperator() {
	if operator != nil {
		operator.Stop()
		operator = nil
	}
}

// result is one run of the plugin.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// plugin runs kubectl-mpijob in the tests' namespace as a user would.
func plugin(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return pluginCtx(t, ctx, args...)
}

func pluginCtx(t *testing.T, ctx context.Context, args ...string) result {
	t.Helper()
	cmd := pluginCmd(ctx, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("kubectl-mpijob %s: %v", strings.Join(args, " "), err)
	}
	t.Logf("$ kubectl mpijob %s\n%s%s", strings.Join(args, " "), r.stdout, r.stderr)
	return r
}

// pluginCmd is kubectl-mpijob with args, run in the tests' namespace with
// the cluster's kubeconfig only.
func pluginCmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, env.plugin, append([]string{"--kubeconfig", env.Kubeconfig, "-n", ns}, args...)...)
	cmd.Env = harness.Environ("KUBECONFIG")
	return cmd
}

// mustPlugin runs the plugin and fails the test unless it exits 0.
func mustPlugin(t *testing.T, args ...string) string {
	t.Helper()
	r := plugin(t, args...)
	if r.code != 0 {
		t.Fatalf("kubectl mpijob %s: %s", strings.Join(args, " "), r)
	}
	return r.stdout
}

// kubectl runs the pinned kubectl in the tests' namespace.
func kubectl(args ...string) (string, error) {
	out, err := env.KubectlCmd(context.Background(), append([]string{"-n", ns}, args...)...).Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return "", fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, exit.Stderr)
		}
		return "", err
	}
	return string(out), nil
}
