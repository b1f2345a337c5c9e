// Package integration runs the controller in-process against a real
// control plane: etcd, kube-apiserver with RBAC, kube-controller-manager
// (garbage collector included), kube-scheduler and kwok's simulated nodes,
// all started by hack/cluster-up.sh.
package integration

import (
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

	clientset "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned"
	"github.com/kubeflow/mpi-operator/test/testcluster"
)

// env holds what every test needs to talk to the cluster.
var env struct {
	root       string
	localDir   string
	kubectl    string
	kubeconfig string
	config     *rest.Config
	kube       kubernetes.Interface
	mpi        clientset.Interface
}

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	root, err := testcluster.RepoRoot()
	if err != nil {
		return 0, err
	}
	// A directory and ports of its own, so that the suite runs beside the
	// e2e suite and the cluster of make local-up.
	cluster := testcluster.New(root, "integration",
		"ETCD_PORT=23790", "ETCD_PEER_PORT=23800", "APISERVER_PORT=16443",
		"CONTROLLER_MANAGER_PORT=20257", "SCHEDULER_PORT=20259", "KWOK_NODES=4")
	env.root, env.localDir = root, cluster.Dir
	if err := cluster.Up(); err != nil {
		return 0, err
	}
	if os.Getenv("KEEP_CLUSTER") == "" {
		defer func() {
			if err := cluster.Down(); err != nil {
				fmt.Fprintln(os.Stderr, "integration: stopping the control plane:", err)
			}
		}()
	}
	env.kubeconfig, env.kubectl = cluster.Kubeconfig, cluster.Kubectl
	if err := newClients(); err != nil {
		return 0, err
	}
	if err := installCRD(); err != nil {
		return 0, err
	}
	if err := installPodGroupCRD(cluster.Dir); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

func newClients() error {
	var err error
	env.config, err = clientcmd.BuildConfigFromFlags("", env.kubeconfig)
	if err != nil {
		return err
	}
	env.config.QPS, env.config.Burst = 200, 400
	if env.kube, err = kubernetes.NewForConfig(env.config); err != nil {
		return err
	}

	env.mpi, err = clientset.NewForConfig(env.config)
	return err
}

// installCRD applies the CRD as a user would, with a client-side apply (which
// fails if the CRD outgrows the last-applied annotation), and waits until it
// is served.
func installCRD() error {
	crd := filepath.Join(env.root, "manifests", "base", "crd.yaml")
	if out, err := kubectl("apply", "-f", crd); err != nil {
		return fmt.Errorf("kubectl apply of the CRD: %w\n%s", err, out)
	}
	// kubectl wait fails outright while the CRD has no status yet.
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := kubectl("get", "crd/mpijobs.kubeflow.org", "-o",
			`jsonpath={.status.conditions[?(@.type=="Established")].status}`)
		if err == nil && strings.TrimSpace(out) == "True" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the CRD is not Established after a minute: %w %s", err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func kubectl(args ...string) (string, error) {
	cmd := exec.Command(env.kubectl, append([]string{"--kubeconfig", env.kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
