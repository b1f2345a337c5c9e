// Package plugin runs the kubectl-mpijob binary as a user would, with
// --kubeconfig, against a control plane of its own (hack/cluster-up.sh
// through test/harness: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and two kwok nodes of 8 GPUs each, kwok serving pods/log
// of the simulated pods) with the operator binary running, and checks each command's output and exit code and what
// it did to the cluster.
//
// Run it with `make test-plugin`, or after `make build`:
//
//	go test -count=1 -v ./test/plugin/
//
// KEEP_CLUSTER=1 leaves the cluster (not the operator) running.
package plugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

func TestMain(m *testing.M) {
	harness.Suite{Name: "plugin-e2e", Settings: []string{"KWOK_NODES=2", "KWOK_NODE_GPUS=8"}, KwokServer: true,
		SetUp: setUp}.Run(m)
}

// setUp builds the plugin, installs the CRD, makes the tests' namespace and
// starts the operator binary as cluster admin, without leader election.
func setUp(c *harness.Cluster) (func(), error) {
	env.Cluster = c
	operator, err := harness.V1.BinaryIn(c.Root, "E2E_OPERATOR_BIN")
	if err != nil {
		return nil, err
	}
	// The plugin as `go install` builds it, from this tree.
	env.plugin = filepath.Join(c.Dir, "kubectl-mpijob")
	build := exec.Command("go", "build", "-o", env.plugin, "./cmd/kubectl-mpijob")
	build.Dir = c.Root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the plugin: %w\n%s", err, out)
	}
	ctx := context.Background()
	if err := c.ApplyCRDs(ctx, false, filepath.Join(c.Root, "manifests", "base", "crd.yaml")); err != nil {
		return nil, err
	}
	// Workers need the namespace's default ServiceAccount.
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		return nil, err
	}
	op, err := harness.StartOperator(ctx, harness.OperatorConfig{Bin: operator, Kubeconfig: c.Kubeconfig,
		LogPath: filepath.Join(c.Dir, "operator.log"),
		Args:    []string{"--leader-elect=false", "--kubectl-delivery-image=mpioperator/kubectl-delivery:e2e", "-v=2"}})
	if err != nil {
		return nil, err
	}
	return op.Stop, nil
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
