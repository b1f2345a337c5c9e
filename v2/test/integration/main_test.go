// Package integration checks the v2 module on a real control plane (etcd,
// kube-apiserver with RBAC, kube-controller-manager with the garbage
// collector and the EndpointSlice controller, kube-scheduler and kwok
// nodes, started by the repository's hack/cluster-up.sh).
//
// Its CRD: what admission refuses and keeps, the scale subresource, kubectl
// explain, the overlays, and applying the CRD over the CRDs of earlier
// installs. These tests replace the CRD and run one after the other.
//
// Its controller, run in-process for one namespace per test (see
// framework_test.go), on pods that the scheduler places and kwok runs: the
// children of a job, elastic resizing, replacement of failed workers,
// suspension as Kueue drives it, managedBy, foreign objects, adoption of
// upstream's children and a restart in the middle of a scale. These tests
// run in parallel, after the CRD tests.
package integration

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeflow/mpi-operator/test/harness"
	clientset "github.com/kubeflow/mpi-operator/v2/pkg/client/clientset/versioned"
)

// suite is what every test needs to reach the cluster.
var suite struct {
	*harness.Cluster
	module string // the v2 module, Root/v2
	mpi    clientset.Interface
}

// parallelTests is how many tests run at once unless -test.parallel says:
// the controller tests mostly wait for the cluster, so more of them than
// there are CPUs fit.
const parallelTests = "12"

// poll is how the tests wait.
var poll = harness.Poller{}

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		if err := flag.Set("test.parallel", parallelTests); err != nil {
			fmt.Fprintln(os.Stderr, "integration-v2:", err)
			os.Exit(1)
		}
	}
	// A launcher Job's pod keeps running until a test ends it: kwok would
	// otherwise complete it, and with it the job, as soon as it runs.
	harness.Suite{Name: "integration-v2", Settings: []string{"KWOK_NODES=2", "KWOK_JOB_PODS_COMPLETE=false"}, QPS: 100,
		SetUp: func(c *harness.Cluster) (func(), error) {
			suite.Cluster, suite.module = c, filepath.Join(c.Root, "v2")
			var err error
			if suite.mpi, err = clientset.NewForConfig(c.Config); err != nil {
				return nil, err
			}
			return nil, applyCRD(filepath.Join(suite.module, "manifests", "base", "crd.yaml"))
		}}.Run(m)
}

const crdName = "mpijobs.kubeflow.org"

// applyCRD applies a CRD as a user would, with a client-side apply (which
// fails if the CRD outgrows the last-applied annotation), and waits until
// the API server serves the CRD it names as it now stands.
func applyCRD(path string) error {
	return suite.ApplyCRDs(context.Background(), true, path)
}

// kubectl runs the pinned kubectl with the admin kubeconfig.
func kubectl(args ...string) (string, error) {
	out, err := suite.KubectlCmd(context.Background(), args...).CombinedOutput()
	return string(out), err
}

// kubectlSplit runs kubectl and returns its standard output and its
// standard error (warnings among them) apart.
func kubectlSplit(args ...string) (stdout, stderr string, err error) {
	cmd := suite.KubectlCmd(context.Background(), args...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// kubectlStdin is kubectl with the given standard input.
func kubectlStdin(stdin string, args ...string) (string, error) {
	cmd := suite.KubectlCmd(context.Background(), args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
