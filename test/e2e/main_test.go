// Package e2e walks the user's path from the outside: it installs the
// manifests with kubectl, runs the operator binary as a separate process
// under the ServiceAccount the manifests give it, and drives MPIJobs with
// kubectl only (user actions are kubectl commands; state is read back with
// kubectl -o json or jsonpath and parsed here).
//
// TestMain starts a control plane of its own with hack/cluster-up.sh (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok nodes) on
// ports that differ from both the integration suite and the local dev
// cluster, and stops it at the end unless KEEP_CLUSTER is set.
//
// Run it with `make test-e2e`, or after `make build`:
//
//	go test -count=1 -v ./test/e2e/
//
// Environment:
//
//	KEEP_CLUSTER=1          leave the cluster (not the operator) running
//	E2E_OPERATOR_BIN=PATH   test this operator binary instead of _output/bin/mpi-operator
package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubeflow/mpi-operator/test/testcluster"
)

// cluster is this suite's control plane: a directory and five ports of its
// own, so that it runs beside the integration suite (_output/integration)
// and the dev cluster of make local-up (_output/local).
var cluster *testcluster.Cluster

// env holds what every test needs.
var env struct {
	root       string // repository root
	localDir   string // _output/e2e
	kubectl    string // the pinned kubectl from cluster.env
	kubeconfig string // admin kubeconfig from cluster.env
	operator   string // _output/bin/mpi-operator
}

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	root, err := testcluster.RepoRoot()
	if err != nil {
		return 0, err
	}
	// Ports of its own, below Linux's ephemeral range (32768-60999): a port
	// in that range can be held by any outgoing connection, such as one
	// the integration suite's cluster left in TIME_WAIT.
	cluster = testcluster.New(root, "e2e",
		"ETCD_PORT=24790", "ETCD_PEER_PORT=24800", "APISERVER_PORT=26443",
		"CONTROLLER_MANAGER_PORT=25257", "SCHEDULER_PORT=25259", "KWOK_NODES=2")
	env.root = root
	env.localDir = cluster.Dir
	env.operator = filepath.Join(root, "_output", "bin", "mpi-operator")
	if bin := os.Getenv("E2E_OPERATOR_BIN"); bin != "" {
		if env.operator, err = filepath.Abs(bin); err != nil {
			return 0, err
		}
	}

	if _, err := os.Stat(env.operator); err != nil {
		return 0, fmt.Errorf("the operator binary is missing (%w): run `make build` first, or `make test-e2e`", err)
	}
	if err := os.MkdirAll(env.localDir, 0o755); err != nil {
		return 0, err
	}
	// kubectl caches the API server's discovery by host and port, which
	// every run of this suite shares; a cache of an earlier run (or of an
	// earlier CRD of this one) names versions the server no longer serves.
	cacheDir, err := os.MkdirTemp(env.localDir, "kubectl-cache-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(cacheDir)
	if err := os.Setenv("KUBECACHEDIR", cacheDir); err != nil {
		return 0, err
	}

	// Start from an empty cluster every time: cluster-up.sh reuses a cluster
	// that is still up (say, from a run with KEEP_CLUSTER), and this suite
	// creates namespaces and jobs that must not exist yet.
	stopStaleOperator()
	if err := cluster.Down(); err != nil {
		return 0, fmt.Errorf("stopping a cluster left in %s: %w", env.localDir, err)
	}
	start := time.Now()
	if err := cluster.Up(); err != nil {
		return 0, err
	}
	fmt.Fprintf(os.Stderr, "e2e: control plane up in %s\n", time.Since(start).Round(100*time.Millisecond))
	if os.Getenv("KEEP_CLUSTER") == "" {
		defer func() {
			if err := cluster.Down(); err != nil {
				fmt.Fprintln(os.Stderr, "e2e: stopping the control plane:", err)
			}
		}()
	}
	env.kubeconfig, env.kubectl = cluster.Kubeconfig, cluster.Kubectl
	code := m.Run()
	if os.Getenv("KEEP_CLUSTER") != "" {
		fmt.Fprintf(os.Stderr, "e2e: KEEP_CLUSTER is set: the cluster stays up\n"+
			"  %s --kubeconfig %s get mpijobs -A\n"+
			"  LOCAL_DIR=%s hack/cluster-down.sh\n", env.kubectl, env.kubeconfig, env.localDir)
	}
	return code, nil
}

// operatorPIDFile records the PID of the operator this suite started, so
// that a later run can stop one that an interrupted run left behind.
func operatorPIDFile() string { return filepath.Join(env.localDir, "operator.pid") }

// stopStaleOperator stops the operator a previous, interrupted run of this
// suite started, if it still runs. It acts only on the recorded PID, and only
// when that process is still our operator binary started with this suite's
// kubeconfig (PIDs get reused).
func stopStaleOperator() {
	data, err := os.ReadFile(operatorPIDFile())
	if err != nil {
		return
	}
	defer os.Remove(operatorPIDFile())
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return
	}
	isOurs := func() bool {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			return false
		}
		args := strings.Split(string(cmdline), "\x00")
		return len(args) > 1 && args[0] == env.operator &&
			strings.Contains(string(cmdline), filepath.Join(env.localDir, "operator.kubeconfig"))
	}
	if !isOurs() {
		return
	}
	fmt.Fprintf(os.Stderr, "e2e: stopping the operator (pid %d) that an earlier run left\n", pid)
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if !isOurs() {
			return
		}
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}
