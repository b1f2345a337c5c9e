// Package integration runs the controller in-process against a real
// control plane: etcd, kube-apiserver with RBAC, kube-controller-manager
// (garbage collector included), kube-scheduler and kwok's simulated nodes,
// all started by hack/cluster-up.sh.
package integration

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// env is the cluster every test talks to.
var env *harness.Cluster

func TestMain(m *testing.M) {
	harness.Suite{Name: "integration", Settings: []string{"KWOK_NODES=4"}, QPS: 200, SetUp: func(c *harness.Cluster) (func(), error) {
		env = c
		if err := installCRD(); err != nil {
			return nil, err
		}
		return nil, installPodGroupCRD(c.Dir)
	}}.Run(m)
}

// installCRD applies the CRD as a user would, with a client-side apply
// (which fails if the CRD outgrows the last-applied annotation), and waits
// until it is served.
func installCRD() error {
	return env.ApplyCRDs(context.Background(), true, filepath.Join(env.Root, "manifests", "base", "crd.yaml"))
}

func kubectl(args ...string) (string, error) {
	out, err := env.KubectlCmd(context.Background(), args...).CombinedOutput()
	return string(out), err
}

// poll is how the tests wait.
var poll = harness.Poller{Every: pollEvery}
