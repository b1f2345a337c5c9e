// Package mpi runs a real MPI program through the launcher's contract of
// the kubeflow.org/v1 operator: Debian's Open MPI starts its ranks "inside"
// the worker pods with the operator's kubexec.sh, as the launcher's
// ServiceAccount, on the hosts of the operator's hostfile and
// discover_hosts.sh.
//
// The control plane is hack/cluster-up.sh's with KWOK_SERVER_PORT set: kwok
// serves the kubelet API of its simulated nodes, so that `kubectl exec`
// into a worker runs the command as a local process, in a working
// directory and with an environment of that pod's own (a kwok Exec object
// per pod), and `kubectl logs` returns a file of the test's choosing (kwok
// Logs objects). The operator binary runs as a separate process.
//
// Run it with `make test-mpi`, or after `make build`:
//
//	go test -count=1 -v ./test/mpi/
//
// It needs mpirun and mpicc (Debian's openmpi-bin and libopenmpi-dev,
// which hack/install-prereqs.sh installs). Environment:
//
//	KEEP_CLUSTER=1          leave the cluster (not the operator) running
//	MPI_OPERATOR_BIN=PATH   test this operator binary instead of _output/bin/mpi-operator
package mpi

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// env holds what every test needs.
var env struct {
	*harness.Cluster
	program string // the MPI program built with mpicc
}

// The operator watches every namespace, with the admin kubeconfig.
func TestMain(m *testing.M) {
	harness.Suite{Name: "mpi", Settings: []string{"KWOK_NODES=2"}, KwokServer: true, SetUp: setUp}.Run(m)
}

// setUp installs the MPIJob CRD and the namespace of the operator's
// leader-election Lease, starts the operator and builds the MPI program.
func setUp(c *harness.Cluster) (func(), error) {
	env.Cluster = c
	for _, cmd := range []string{"mpirun", "mpicc"} {
		if _, err := exec.LookPath(cmd); err != nil {
			return nil, fmt.Errorf("%s is missing: run hack/install-prereqs.sh (Debian's openmpi-bin and libopenmpi-dev)", cmd)
		}
	}
	operator, err := harness.V1.BinaryIn(c.Root, "MPI_OPERATOR_BIN")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.ApplyCRDs(ctx, false, filepath.Join(c.Root, "manifests", "base", "crd.yaml")); err != nil {
		return nil, err
	}
	if err := c.EnsureNamespace(ctx, "mpi-operator"); err != nil {
		return nil, err
	}
	op, err := harness.StartOperator(ctx, harness.OperatorConfig{Bin: operator, Kubeconfig: c.Kubeconfig,
		LogPath: filepath.Join(c.Dir, "operator.log"),
		Args:    []string{"--lock-namespace=mpi-operator", "--kubectl-delivery-image=mpioperator/kubectl-delivery:mpi-test", "-v=2"}})
	if err != nil {
		return nil, err
	}
	tearDown := func() {
		op.Stop()
		fmt.Fprintf(os.Stderr, "mpi: the operator's log is %s\n", op.LogPath)
	}
	work, err := os.MkdirTemp(c.Dir, "work-")
	if err != nil {
		return tearDown, err
	}
	env.program, err = buildProgram(ctx, work)
	return func() { tearDown(); _ = os.RemoveAll(work) }, err
}

// buildProgram compiles testdata/allreduce.c with mpicc into dir.
func buildProgram(ctx context.Context, dir string) (string, error) {
	out := filepath.Join(dir, "allreduce")
	cmd := exec.CommandContext(ctx, "mpicc", "-O2", "-o", out, filepath.Join("testdata", "allreduce.c"))
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("mpicc: %w\n%s", err, b)
	}
	return out, nil
}

// kubectl runs the pinned kubectl as the admin and returns its output; an
// error carries what it said on stderr.
func kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := env.KubectlCmd(ctx, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		err = fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), err
}
