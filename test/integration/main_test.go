// Package integration runs the controller in-process against a real
// control plane: etcd, kube-apiserver with RBAC, kube-controller-manager
// (garbage collector included), kube-scheduler and kwok's simulated nodes,
// all started by hack/cluster-up.sh.
package integration

import (
	"bufio"
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
)

// The suite's cluster has its own directory and ports, so that it can run
// beside a cluster of make local-up.
var clusterEnv = []string{
	"ETCD_PORT=23790",
	"ETCD_PEER_PORT=23800",
	"APISERVER_PORT=16443",
	"CONTROLLER_MANAGER_PORT=20257",
	"SCHEDULER_PORT=20259",
	"KWOK_NODES=4",
}

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
	root, err := filepath.Abs("../..")
	if err != nil {
		return 0, err
	}
	env.root = root
	env.localDir = filepath.Join(root, "_output", "integration")
	clusterEnv = append(clusterEnv, "LOCAL_DIR="+env.localDir)

	if err := script("hack/cluster-up.sh"); err != nil {
		return 0, fmt.Errorf("starting the control plane (logs in %s): %w", env.localDir, err)
	}
	if os.Getenv("KEEP_CLUSTER") == "" {
		defer func() {
			if err := script("hack/cluster-down.sh"); err != nil {
				fmt.Fprintln(os.Stderr, "integration: stopping the control plane:", err)
			}
		}()
	}
	if err := loadClusterEnv(filepath.Join(env.localDir, "cluster.env")); err != nil {
		return 0, err
	}
	if err := installCRD(); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

// script runs a hack/ script with the suite's cluster settings.
func script(path string, args ...string) error {
	cmd := exec.Command(filepath.Join(env.root, path), args...)
	cmd.Dir = env.root
	cmd.Env = append(os.Environ(), clusterEnv...)
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	return cmd.Run()
}

// loadClusterEnv reads the KEY=value lines cluster-up.sh writes and builds
// the clients.
func loadClusterEnv(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	vars := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(s.Text()), "=")
		if ok {
			vars[k] = strings.Trim(v, `"'`)
		}
	}
	env.kubeconfig, env.kubectl = vars["KUBECONFIG"], vars["KUBECTL"]
	if env.kubeconfig == "" || env.kubectl == "" {
		return fmt.Errorf("%s lacks KUBECONFIG or KUBECTL", path)
	}
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
