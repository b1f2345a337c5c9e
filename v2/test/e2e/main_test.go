// Package e2e walks the user's path of the v2beta1 operator from the
// outside: it installs v2/manifests with kubectl, runs the
// mpi-operator-v2 binary as a process of its own with the arguments of
// upstream's install and the identity of the ServiceAccount the manifests
// give it, and drives MPIJobs with kubectl only, reading the state back
// with kubectl -o json or jsonpath.
//
// TestMain starts a control plane of its own with hack/cluster-up.sh in
// _output/e2e-v2, on ports no other suite uses, with kwok leaving the pods
// of batch Jobs Running (a launcher runs until a test ends it), and stops
// it at the end unless KEEP_CLUSTER is set.
//
// Run it with `make test-e2e-v2` at the repository root, or after `make
// build`:
//
//	cd v2 && go test -count=1 -v ./test/e2e/
//
// Environment:
//
//	KEEP_CLUSTER=1          leave the cluster (not the operator) running
//	E2E_OPERATOR_BIN=PATH   test this binary instead of _output/bin/mpi-operator-v2
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kubeflow/mpi-operator/test/testcluster"
)

// monitoringPort is the operator's --monitoring-port in this suite.
const monitoringPort = 19080

// suite is what every test needs.
var suite struct {
	repo       string // the repository
	module     string // the v2 module, repo/v2
	dir        string // _output/e2e-v2: the cluster's state, logs
	kubectl    string // the pinned kubectl
	kubeconfig string // the admin kubeconfig
	binary     string // the operator under test
}

func TestMain(m *testing.M) {
	stop, err := startCluster()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e-v2:", err)
		os.Exit(1)
	}
	code := m.Run()
	stop()
	os.Exit(code)
}

// startCluster fills in suite and starts the cluster afresh; stop ends it.
func startCluster() (stop func(), err error) {
	// The v2 module is the nearest go.mod; the repository holds it.
	if suite.module, err = testcluster.RepoRoot(); err != nil {
		return nil, err
	}
	suite.repo = filepath.Dir(suite.module)
	cluster := testcluster.New(suite.repo, "e2e-v2",
		"ETCD_PORT=19790", "ETCD_PEER_PORT=19800", "APISERVER_PORT=19443",
		"CONTROLLER_MANAGER_PORT=19257", "SCHEDULER_PORT=19259", "KWOK_NODES=2",
		// The launcher is a batch Job's pod: kwok's stock stages would
		// complete it at once, and with it every job.
		"KWOK_JOB_PODS_COMPLETE=false")
	suite.dir = cluster.Dir
	if suite.binary, err = operatorBinary(); err != nil {
		return nil, err
	}
	stopLeftOperator()
	if stop, err = cluster.Fresh("e2e-v2"); err != nil {
		return nil, err
	}
	suite.kubeconfig, suite.kubectl = cluster.Kubeconfig, cluster.Kubectl
	return stop, nil
}

// operatorBinary is E2E_OPERATOR_BIN, or _output/bin/mpi-operator-v2,
// built here when `make build` has not built it yet.
func operatorBinary() (string, error) {
	if bin := os.Getenv("E2E_OPERATOR_BIN"); bin != "" {
		return filepath.Abs(bin)
	}
	bin := filepath.Join(suite.repo, "_output", "bin", "mpi-operator-v2")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	build := exec.Command("go", "build", "-o", bin, "./cmd/mpi-operator")
	build.Dir = suite.module
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %w\n%s", bin, err, out)
	}
	return bin, nil
}
