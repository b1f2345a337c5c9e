// Package kueue runs Kueue's own manager (sigs.k8s.io/kueue v0.12.3, built
// by hack/kueue.sh) and the v2 controller against the local control plane
// of hack/cluster-up.sh, and checks that Kueue admits suspended elastic
// v2beta1 MPIJobs against a ClusterQueue's quota, one at a time.
//
// Kueue's webhooks are not installed: the API server never calls them. The
// tests create their jobs as Kueue's webhook would leave them, suspended
// and labelled with kueue.x-k8s.io/queue-name; everything after that
// (Workloads, admission, the nodeSelector of the ResourceFlavor, resuming
// the job, releasing the quota when it finishes) is Kueue's manager.
//
// Kueue v0.12.3 reads its metrics certificate from the fixed path
// /etc/kueue/metrics/certs when its internal certificate management is
// off. The manager therefore runs in a user and mount namespace of its own
// (unshare) where an overlay over /etc adds that directory; the machine's
// /etc is not touched.
package kueue

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/kubeflow/mpi-operator/pkg/operator"
	"github.com/kubeflow/mpi-operator/test/testcluster"
	clientset "github.com/kubeflow/mpi-operator/v2/pkg/client/clientset/versioned"
	"github.com/kubeflow/mpi-operator/v2/pkg/controller"
)

// Ports of Kueue's manager, below the ephemeral range and apart from the
// control plane's.
const (
	kueueHealthPort  = 22281
	kueueMetricsPort = 22282
	kueueWebhookPort = 22283
)

// suite is what every test needs to reach the cluster.
var suite struct {
	cluster *testcluster.Cluster
	kube    kubernetes.Interface
	mpi     clientset.Interface
	dyn     dynamic.Interface
	// kueue is Kueue's manager; its log is named in failures.
	kueue *kueueManager
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

// run sets the suite up, runs the tests and tears the suite down; it
// returns the exit code.
func run(m *testing.M) int {
	code, err := setUp(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kueue:", err)
		return 1
	}
	return code
}

// setUp starts everything the tests need, runs them, and stops it all.
func setUp(m *testing.M) (int, error) {
	module, err := testcluster.RepoRoot() // the v2 module's, inside the repository
	if err != nil {
		return 0, err
	}
	repo := filepath.Dir(module)
	kueueDir, err := buildKueue(repo)
	if err != nil {
		return 0, err
	}
	// Job pods stay Running until a test ends them: kwok's pod-complete
	// stage would otherwise finish every launcher at once.
	cluster := testcluster.New(repo, "kueue",
		"ETCD_PORT=22790", "ETCD_PEER_PORT=22800", "APISERVER_PORT=18443",
		"CONTROLLER_MANAGER_PORT=22257", "SCHEDULER_PORT=22259", "KWOK_NODES=2",
		"KWOK_JOB_PODS_COMPLETE=false")
	if err := cluster.Up(); err != nil {
		return 0, err
	}
	if os.Getenv("KEEP_CLUSTER") == "" {
		defer func() {
			if err := cluster.Down(); err != nil {
				fmt.Fprintln(os.Stderr, "kueue: stopping the control plane:", err)
			}
		}()
	}
	suite.cluster = cluster
	config, err := clientcmd.BuildConfigFromFlags("", cluster.Kubeconfig)
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
	if suite.dyn, err = dynamic.NewForConfig(config); err != nil {
		return 0, err
	}
	meta, err := metadata.NewForConfig(config)
	if err != nil {
		return 0, err
	}

	crds := []string{filepath.Join(module, "manifests", "base", "crd.yaml"), filepath.Join(kueueDir, "crds")}
	if err := applyCRDs(crds...); err != nil {
		return 0, err
	}
	// Kueue's default namespace; its manager looks for nothing else there
	// with internal certificate management off, but keep it as deployed.
	if _, err := suite.kube.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kueue-system"}}, metav1.CreateOptions{}); err != nil &&
		!strings.Contains(err.Error(), "already exists") {
		return 0, err
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopController, err := runController(ctx, cluster.Dir, suite.kube, meta, suite.mpi)
	if err != nil {
		return 0, err
	}
	defer stopController()

	manager, err := startKueue(filepath.Join(kueueDir, "bin", "kueue"), filepath.Join(cluster.Dir, "kueue-manager"),
		cluster.Kubeconfig)
	if err != nil {
		return 0, err
	}
	suite.kueue = manager
	defer manager.stop()
	return m.Run(), nil
}

// buildKueue runs hack/kueue.sh (which builds nothing once the manager is
// in its cache) and returns the cache directory it prints.
func buildKueue(repo string) (string, error) {
	cmd := exec.Command(filepath.Join(repo, "hack", "kueue.sh"))
	cmd.Dir = repo
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/kueue.sh: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}

// applyCRDs applies CRD files or directories server-side (Kueue's
// Workload CRD outgrows the annotation of a client-side apply) and waits
// until every CRD is Established.
func applyCRDs(paths ...string) error {
	for _, p := range paths {
		if out, err := suite.cluster.KubectlCmd("apply", "--server-side", "--force-conflicts", "-f", p).CombinedOutput(); err != nil {
			return fmt.Errorf("applying %s: %w\n%s", p, err, out)
		}
	}
	var pending string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true,
		func(context.Context) (bool, error) {
			out, err := suite.cluster.KubectlCmd("get", "crd", "-o",
				`jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Established")].status}{"\n"}{end}`).Output()
			if err != nil {
				return false, nil
			}
			pending = ""
			for _, line := range strings.Fields(string(out)) {
				if !strings.HasSuffix(line, "=True") {
					pending += " " + line
				}
			}
			return pending == "", nil
		})
	if err != nil {
		return fmt.Errorf("CRDs not Established:%s: %w", pending, err)
	}
	return nil
}

// runController runs the v2 controller in this process, logging to
// <dir>/mpi-operator.log, and returns what stops it.
func runController(ctx context.Context, dir string, kube kubernetes.Interface, meta metadata.Interface,
	mpi clientset.Interface) (func(), error) {
	logFile, err := os.Create(filepath.Join(dir, "mpi-operator.log"))
	if err != nil {
		return nil, err
	}
	klog.LogToStderr(false)
	klog.SetOutput(logFile)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- operator.RunController(ctx, &operator.RunningController{}, 4,
			func(ctx context.Context) (operator.Informers, operator.Controller) {
				cfg := controller.Config{}
				inf := controller.NewInformers(kube, meta, mpi, nil, nil, cfg)
				return inf, controller.NewMPIJobController(ctx, kube, mpi, nil, nil, inf, cfg)
			})
	}()
	return func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "kueue: the MPIJob controller:", err)
		}
		klog.Flush()
		_ = logFile.Close()
	}, nil
}

// kueueManager is Kueue's manager running as a process.
type kueueManager struct {
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
}

// startKueue starts Kueue's manager with its state in dir and waits until
// it is ready.
func startKueue(bin, dir, kubeconfig string) (*kueueManager, error) {
	certs := filepath.Join(dir, "certs")
	// The overlay's upper layer over /etc: only the metrics certificate.
	upper, work := filepath.Join(dir, "etc-upper"), filepath.Join(dir, "etc-work")
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	metricsCerts := filepath.Join(upper, "kueue", "metrics", "certs")
	for _, d := range []string{certs, metricsCerts, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	// One self-signed certificate for the webhook server and the metrics
	// server; nothing calls either.
	if out, err := exec.Command("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "7",
		"-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
		"-keyout", filepath.Join(certs, "tls.key"), "-out", filepath.Join(certs, "tls.crt")).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("openssl: %w\n%s", err, out)
	}
	for _, f := range []string{"tls.key", "tls.crt"} {
		data, err := os.ReadFile(filepath.Join(certs, f))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(metricsCerts, f), data, 0o600); err != nil {
			return nil, err
		}
	}
	configPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(configPath, []byte(kueueConfig(certs)), 0o644); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "kueue.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()

	// unshare execs sh, which execs the manager: one process, whose PID
	// is the command's.
	cmd := exec.Command("unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
		`mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1,workdir=$2" /etc && shift 2 && exec "$@"`,
		"sh", upper, work, bin, "--config", configPath)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting Kueue's manager: %w", err)
	}
	k := &kueueManager{cmd: cmd, log: logPath, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(k.exited)
	}()

	ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", kueueHealthPort)
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true,
		func(context.Context) (bool, error) {
			if k.hasExited() {
				return false, errors.New("it exited")
			}
			resp, err := http.Get(ready)
			if err != nil {
				return false, nil
			}
			_ = resp.Body.Close()
			return resp.StatusCode == http.StatusOK, nil
		})
	if err != nil {
		k.stop()
		return nil, fmt.Errorf("Kueue's manager is not ready (%w); its log: %s", err, logPath)
	}
	return k, nil
}

// kueueConfig is the manager's Configuration (config.kueue.x-k8s.io): the
// MPIJob integration only, no leader election, no certificate management,
// every server on the loopback, no visibility API server.
func kueueConfig(certDir string) string {
	return fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
namespace: kueue-system
health:
  healthProbeBindAddress: 127.0.0.1:%d
metrics:
  bindAddress: 127.0.0.1:%d
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
clientConnection:
  qps: 50
  burst: 100
integrations:
  frameworks:
  - kubeflow.org/mpijob
featureGates:
  # Its API server wants the in-cluster configuration, or exits.
  VisibilityOnDemand: false
`, kueueHealthPort, kueueMetricsPort, kueueWebhookPort, certDir)
}

// stop ends the manager: SIGTERM, then SIGKILL after 20 s.
func (k *kueueManager) stop() {
	_ = k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.exited:
	case <-time.After(20 * time.Second):
		_ = k.cmd.Process.Kill()
		<-k.exited
	}
}

// hasExited tells whether the manager's process has ended.
func (k *kueueManager) hasExited() bool {
	select {
	case <-k.exited:
		return true
	default:
		return false
	}
}
