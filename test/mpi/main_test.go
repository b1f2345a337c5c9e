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
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	clientset "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned"
	"github.com/kubeflow/mpi-operator/test/testcluster"
)

// kwokServerPort is where kwok serves the nodes' kubelet API; the nodes
// publish it as their kubelet endpoint.
const kwokServerPort = "31250"

// env holds what every test needs.
var env struct {
	root       string
	dir        string // the cluster's LOCAL_DIR, _output/mpi
	kubectl    string // the pinned kubectl
	kubeconfig string // admin
	config     *rest.Config
	kube       kubernetes.Interface
	mpi        clientset.Interface
	dynamic    dynamic.Interface
	program    string // the MPI program built with mpicc
}

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mpi:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	for _, cmd := range []string{"mpirun", "mpicc"} {
		if _, err := exec.LookPath(cmd); err != nil {
			return 0, fmt.Errorf("%s is missing: run hack/install-prereqs.sh (Debian's openmpi-bin and libopenmpi-dev)", cmd)
		}
	}
	root, err := testcluster.RepoRoot()
	if err != nil {
		return 0, err
	}
	env.root = root
	operator := filepath.Join(root, "_output", "bin", "mpi-operator")
	if bin := os.Getenv("MPI_OPERATOR_BIN"); bin != "" {
		if operator, err = filepath.Abs(bin); err != nil {
			return 0, err
		}
	}
	if _, err := os.Stat(operator); err != nil {
		return 0, fmt.Errorf("the operator binary is missing (%w): run `make build` first, or `make test-mpi`", err)
	}

	cluster := testcluster.New(root, "mpi",
		"ETCD_PORT=31790", "ETCD_PEER_PORT=31800", "APISERVER_PORT=31443",
		"CONTROLLER_MANAGER_PORT=31257", "SCHEDULER_PORT=31259", "KWOK_NODES=2",
		"KWOK_SERVER_PORT="+kwokServerPort)
	env.dir = cluster.Dir
	stop, err := cluster.Fresh("mpi")
	if err != nil {
		return 0, err
	}
	defer stop()
	env.kubectl, env.kubeconfig = cluster.Kubectl, cluster.Kubeconfig
	if err := connect(); err != nil {
		return 0, err
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := setUpOperator(ctx); err != nil {
		return 0, err
	}
	op, err := startOperator(operator)
	if err != nil {
		return 0, err
	}
	defer op.stop()

	work, err := os.MkdirTemp(env.dir, "work-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(work)
	if env.program, err = buildProgram(ctx, work); err != nil {
		return 0, err
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "mpi: the operator's log is %s\n", op.logPath)
	}
	return code, nil
}

// connect makes the admin clients.
func connect() error {
	var err error
	if env.config, err = clientcmd.BuildConfigFromFlags("", env.kubeconfig); err != nil {
		return err
	}
	if env.kube, err = kubernetes.NewForConfig(env.config); err != nil {
		return err
	}
	if env.mpi, err = clientset.NewForConfig(env.config); err != nil {
		return err
	}
	env.dynamic, err = dynamic.NewForConfig(env.config)
	return err
}

// setUpOperator installs the MPIJob CRD and the namespace of the
// operator's leader-election Lease.
func setUpOperator(ctx context.Context) error {
	crd := filepath.Join(env.root, "manifests", "base", "crd.yaml")
	if out, err := kubectl(ctx, "apply", "--server-side", "-f", crd); err != nil {
		return fmt.Errorf("applying %s: %w\n%s", crd, err, out)
	}
	// kubectl wait fails, rather than waits, while the new CRD has no
	// conditions yet.
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, last = kubectl(ctx, "wait", "--for=condition=Established", "--timeout=10s", "crd/mpijobs.kubeflow.org")
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the MPIJob CRD to be Established: %w", errors.Join(err, last))
	}
	if out, err := kubectl(ctx, "create", "namespace", "mpi-operator"); err != nil {
		return fmt.Errorf("creating namespace mpi-operator: %w\n%s", err, out)
	}
	return nil
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
	cmd := exec.CommandContext(ctx, env.kubectl, append([]string{"--kubeconfig", env.kubeconfig}, args...)...)
	cmd.Env = withoutKubeconfig(os.Environ())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		err = fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), err
}

// withoutKubeconfig drops KUBECONFIG from an environment: it would win over
// the flags and settings this suite gives.
func withoutKubeconfig(environ []string) []string {
	var out []string
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "KUBECONFIG=") {
			out = append(out, kv)
		}
	}
	return out
}
