// Package integration checks the v2 module's CRD on a real control plane
// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok
// nodes, started by the repository's hack/cluster-up.sh): what admission
// refuses and keeps, the scale subresource, kubectl explain, the overlays,
// and applying the CRD over the CRDs of earlier installs.
package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeflow/mpi-operator/test/testcluster"
	clientset "github.com/kubeflow/mpi-operator/v2/pkg/client/clientset/versioned"
)

// suite is what every test needs to reach the cluster.
var suite struct {
	repo       string // the repository, whose hack/ starts the cluster
	module     string // the v2 module, repo/v2
	kubectlBin string
	kubeconfig string
	kube       kubernetes.Interface
	mpi        clientset.Interface
}

func TestMain(m *testing.M) {
	code, err := setUp(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration-v2:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func setUp(m *testing.M) (int, error) {
	// The nearest go.mod is the v2 module's; the repository is its parent.
	module, err := testcluster.RepoRoot()
	if err != nil {
		return 0, err
	}
	suite.module, suite.repo = module, filepath.Dir(module)
	// A directory and ports of its own, below the ephemeral range and apart
	// from the other suites', so that it can run beside them.
	cluster := testcluster.New(suite.repo, "integration-v2",
		"ETCD_PORT=21790", "ETCD_PEER_PORT=21800", "APISERVER_PORT=17443",
		"CONTROLLER_MANAGER_PORT=21257", "SCHEDULER_PORT=21259", "KWOK_NODES=2")
	if err := cluster.Up(); err != nil {
		return 0, err
	}
	if os.Getenv("KEEP_CLUSTER") == "" {
		defer func() {
			if err := cluster.Down(); err != nil {
				fmt.Fprintln(os.Stderr, "integration-v2: stopping the control plane:", err)
			}
		}()
	}
	suite.kubeconfig, suite.kubectlBin = cluster.Kubeconfig, cluster.Kubectl
	config, err := clientcmd.BuildConfigFromFlags("", suite.kubeconfig)
	if err != nil {
		return 0, err
	}
	config.QPS, config.Burst = 100, 200
	if suite.kube, err = kubernetes.NewForConfig(config); err != nil {
		return 0, err
	}
	if suite.mpi, err = clientset.NewForConfig(config); err != nil {
		return 0, err
	}
	// A CRD another suite's run left behind on a kept cluster goes first.
	if out, err := kubectl("delete", "crd", crdName, "--ignore-not-found", "--wait"); err != nil {
		return 0, fmt.Errorf("deleting an earlier CRD: %w\n%s", err, out)
	}
	if err := applyCRD(filepath.Join(suite.module, "manifests", "base", "crd.yaml")); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

const crdName = "mpijobs.kubeflow.org"

// applyCRD applies a CRD as a user would, with a client-side apply (which
// fails if the CRD outgrows the last-applied annotation), and waits until
// the API server serves the CRD it names as it now stands.
func applyCRD(path string) error {
	if out, err := kubectl("apply", "-f", path); err != nil {
		return fmt.Errorf("kubectl apply -f %s: %w\n%s", path, err, out)
	}
	return waitEstablished()
}

// waitEstablished waits for the CRD's Established condition. kubectl wait
// would fail at once while the CRD has no status yet.
func waitEstablished() error {
	var out string
	err := poll(time.Minute, func() (bool, error) {
		var err error
		out, err = kubectl("get", "crd", crdName, "-o",
			`jsonpath={.status.conditions[?(@.type=="Established")].status}`)
		return err == nil && strings.TrimSpace(out) == "True", nil
	})
	if err != nil {
		return fmt.Errorf("the CRD is not Established: %w (last: %s)", err, out)
	}
	return nil
}

// poll calls done every 100ms until it reports true or an error, or the
// timeout passes.
func poll(timeout time.Duration, done func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := done()
		if ok || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not done after %s", timeout)
		case <-tick.C:
		}
	}
}

// kubectl runs the pinned kubectl with the admin kubeconfig.
func kubectl(args ...string) (string, error) {
	cmd := exec.Command(suite.kubectlBin, append([]string{"--kubeconfig", suite.kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// kubectlSplit runs kubectl and returns its standard output and its
// standard error (warnings among them) apart.
func kubectlSplit(args ...string) (stdout, stderr string, err error) {
	cmd := exec.Command(suite.kubectlBin, append([]string{"--kubeconfig", suite.kubeconfig}, args...)...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// kubectlStdin is kubectl with the given standard input.
func kubectlStdin(stdin string, args ...string) (string, error) {
	cmd := exec.Command(suite.kubectlBin, append([]string{"--kubeconfig", suite.kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// newNamespace creates a namespace for one test and deletes it after.
func newNamespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.TrimRight(name, "-") + fmt.Sprintf("-%d", time.Now().UnixNano()%100000)
	if out, err := kubectl("create", "namespace", name); err != nil {
		t.Fatalf("creating namespace %s: %v\n%s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := kubectl("delete", "namespace", name, "--wait=false"); err != nil {
			t.Logf("deleting namespace %s: %v\n%s", name, err, out)
		}
	})
	return name
}
