// Package e2e walks the user's path from the outside: it installs the
// manifests with kubectl, runs the operator binary as a separate process
// under the ServiceAccount the manifests give it, and drives MPIJobs with
// kubectl only (user actions are kubectl commands; state is read back with
// kubectl -o json or jsonpath and parsed here).
//
// TestMain starts a control plane of its own with hack/cluster-up.sh (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok nodes) on
// free ports (test/harness), so that it runs beside the other suites and the dev
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
	"testing"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// env holds what every test needs: the suite's control plane and the
// operator under test.
var env struct {
	*harness.Cluster
	operator string // E2E_OPERATOR_BIN, or _output/bin/mpi-operator
}

func TestMain(m *testing.M) {
	harness.Suite{Name: "e2e", Settings: []string{"KWOK_NODES=2"}, SetUp: func(c *harness.Cluster) (func(), error) {
		env.Cluster = c
		var err error
		env.operator, err = harness.V1.BinaryIn(c.Root, "E2E_OPERATOR_BIN")
		return nil, err
	}}.Run(m)
}
