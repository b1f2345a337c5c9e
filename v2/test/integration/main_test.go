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
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
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
	config     *rest.Config
	kube       kubernetes.Interface
	mpi        clientset.Interface
}

// parallelTests is how many tests run at once unless -test.parallel says:
// the controller tests mostly wait for the cluster, so more of them than
// there are CPUs fit.
const parallelTests = "12"

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
	// from the other suites', so that it can run beside them. A launcher
	// Job's pod keeps running until a test ends it: kwok would otherwise
	// complete it, and with it the job, as soon as it runs.
	cluster := testcluster.New(suite.repo, "integration-v2",
		"ETCD_PORT=21790", "ETCD_PEER_PORT=21800", "APISERVER_PORT=17443",
		"CONTROLLER_MANAGER_PORT=21257", "SCHEDULER_PORT=21259", "KWOK_NODES=2",
		"KWOK_JOB_PODS_COMPLETE=false")
	if err := cluster.Up(); err != nil {
		return 0, err
	}
	if err := checkJobPodsKept(cluster.Dir); err != nil {
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
	suite.config = config
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

// checkJobPodsKept fails when the cluster in dir, which may have been
// started before with other settings and kept (KEEP_CLUSTER), completes
// the pods of batch Jobs by itself.
func checkJobPodsKept(dir string) error {
	stages, err := os.ReadFile(filepath.Join(dir, "kwok.yaml"))
	if err != nil {
		return err
	}
	if strings.Contains(string(stages), "name: pod-complete") {
		return fmt.Errorf("kwok in %s completes the pods of batch Jobs (its pod-complete stage); "+
			"stop that cluster with hack/cluster-down.sh (LOCAL_DIR=%s) so that it starts with KWOK_JOB_PODS_COMPLETE=false", dir, dir)
	}
	return nil
}

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
