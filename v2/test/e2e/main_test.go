// Package e2e walks the user's path of the v2beta1 operator from the
// outside: it installs v2/manifests with kubectl, runs the
// mpi-operator-v2 binary as a process of its own with the arguments of
// upstream's install and the identity of the ServiceAccount the manifests
// give it, and drives MPIJobs with kubectl only, reading the state back
// with kubectl -o json or jsonpath.
//
// TestMain starts a control plane of its own with hack/cluster-up.sh in
// _output/e2e-v2, on free ports (test/harness), with kwok leaving the pods
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
	"testing"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// suite is what every test needs.
var suite struct {
	*harness.Cluster
	binary string // the operator under test
}

// monitoringPort is the operator's --monitoring-port in this suite, a free
// port.
var monitoringPort int

// The launcher is a batch Job's pod: kwok's stock stages would complete it
// at once, and with it every job.
func TestMain(m *testing.M) {
	harness.Suite{Name: "e2e-v2", Settings: []string{"KWOK_NODES=2", "KWOK_JOB_PODS_COMPLETE=false"},
		SetUp: func(c *harness.Cluster) (func(), error) {
			suite.Cluster = c
			ports, err := harness.FreePorts(1)
			if err != nil {
				return nil, err
			}
			monitoringPort = ports[0]
			suite.binary, err = harness.V2beta1.BinaryIn(c.Root, "E2E_OPERATOR_BIN")
			return nil, err
		}}.Run(m)
}
