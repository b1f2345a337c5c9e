// Package plugin runs the kubectl-mpijob binary as a user would, with
// --kubeconfig, against a control plane of its own (hack/cluster-up.sh
// through test/testcluster: etcd, kube-apiserver, kube-controller-manager,
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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeflow/mpi-operator/test/testcluster"
)

// The suite's ports, below Linux's ephemeral range, apart from the other
// suites' and the dev cluster's.
var clusterSettings = []string{
	"ETCD_PORT=30790", "ETCD_PEER_PORT=30800", "APISERVER_PORT=30443",
	"CONTROLLER_MANAGER_PORT=30257", "SCHEDULER_PORT=30259",
	"KWOK_NODES=2", "KWOK_NODE_GPUS=8", "KWOK_SERVER_PORT=30250",
}

// operatorPort serves the operator's /healthz.
const operatorPort = 30080

// ns is the namespace the tests' jobs run in.
const ns = "plugin-e2e"

var env struct {
	cluster *testcluster.Cluster
	plugin  string // the kubectl-mpijob binary built for this run
}

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "plugin e2e:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	root, err := testcluster.RepoRoot()
	if err != nil {
		return 0, err
	}
	operator := filepath.Join(root, "_output", "bin", "mpi-operator")
	if _, err := os.Stat(operator); err != nil {
		return 0, fmt.Errorf("the operator binary is missing (%w): run `make build` first, or `make test-plugin`", err)
	}
	env.cluster = testcluster.New(root, "plugin-e2e", clusterSettings...)
	stop, err := env.cluster.Fresh("plugin e2e")
	if err != nil {
		return 0, err
	}
	defer stop()
	// The plugin as `go install` builds it, from this tree.
	env.plugin = filepath.Join(env.cluster.Dir, "kubectl-mpijob")
	build := exec.Command("go", "build", "-o", env.plugin, "./cmd/kubectl-mpijob")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("building the plugin: %w\n%s", err, out)
	}
	if err := install(root); err != nil {
		return 0, err
	}
	op, err := startOperator(operator, filepath.Join(env.cluster.Dir, "operator.log"))
	if err != nil {
		return 0, err
	}
	defer op.stop()
	return m.Run(), nil
}

// install applies the CRD and makes the tests' namespace, with its default
// ServiceAccount, which workers need.
func install(root string) error {
	admin := func(args ...string) error {
		if out, err := env.cluster.KubectlCmd(args...).CombinedOutput(); err != nil {
			return fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := admin("apply", "--server-side", "-f", filepath.Join(root, "manifests", "base", "crd.yaml")); err != nil {
		return err
	}
	// kubectl wait fails outright while the new CRD has no status yet.
	err := eventually(func() error {
		return admin("wait", "--for=condition=Established", "--timeout=5s", "crd/mpijobs.kubeflow.org")
	})
	if err != nil {
		return err
	}
	if err := admin("create", "namespace", ns); err != nil {
		return err
	}
	return eventually(func() error {
		_, err := kubectl("get", "serviceaccount", "default")
		return err
	})
}

// operatorProc is the operator running as a child process.
type operatorProc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startOperator runs the operator binary as cluster admin, without leader
// election, and waits for its /healthz.
func startOperator(bin, logPath string) (*operatorProc, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--kubeConfig", env.cluster.Kubeconfig, "--leader-elect=false",
		fmt.Sprintf("--monitoring-port=%d", operatorPort), "--kubectl-delivery-image=mpioperator/kubectl-delivery:e2e", "-v=2")
	cmd.Env = slicesWithout(os.Environ(), "KUBECONFIG=", "KUBEFLOW_NAMESPACE=")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	p := &operatorProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	err = eventually(func() error {
		select {
		case <-p.done:
			return fmt.Errorf("the operator exited; see %s", logPath)
		default:
		}
		out, err := exec.Command("curl", "-sf", fmt.Sprintf("http://127.0.0.1:%d/healthz", operatorPort)).Output()
		if err != nil || strings.TrimSpace(string(out)) != "ok" {
			return fmt.Errorf("/healthz: %q: %w", out, err)
		}
		return nil
	})
	if err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// stop ends the operator with SIGTERM, and SIGKILL 30 s later.
func (p *operatorProc) stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func slicesWithout(env []string, prefixes ...string) []string {
	var out []string
	for _, kv := range env {
		keep := true
		for _, p := range prefixes {
			keep = keep && !strings.HasPrefix(kv, p)
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
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
	cmd := exec.CommandContext(ctx, env.plugin, append([]string{"--kubeconfig", env.cluster.Kubeconfig, "-n", ns}, args...)...)
	cmd.Env = slicesWithout(os.Environ(), "KUBECONFIG=")
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
	out, err := env.cluster.KubectlCmd(append([]string{"-n", ns}, args...)...).Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return "", fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, exit.Stderr)
		}
		return "", err
	}
	return string(out), nil
}

// eventually retries f every 250 ms until it returns nil, for up to a
// minute.
func eventually(f func() error) error {
	const timeout = time.Minute
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %w", timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
