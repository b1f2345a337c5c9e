// Package kueue runs Kueue's own manager (sigs.k8s.io/kueue, the version
// KUEUE_VERSION names, built by hack/kueue.sh) and the v2 controller
// against the local control plane of hack/cluster-up.sh, and checks that
// Kueue admits suspended elastic v2beta1 MPIJobs against a ClusterQueue's
// quota, one at a time, and that a job whose launcher retries stays
// PodsReady. `make test-kueue` runs it once for each version of
// KUEUE_VERSIONS, each on a control plane of its own.
//
// Kueue's webhooks are not installed: the API server never calls them. The
// tests create their jobs as Kueue's webhook would leave them, suspended
// and labelled with kueue.x-k8s.io/queue-name; everything after that
// (Workloads, admission, the nodeSelector of the ResourceFlavor, resuming
// the job, releasing the quota when it finishes) is Kueue's manager.
//
// Kueue's API differs between the versions: the suite speaks the
// kueue.x-k8s.io version the installed CRDs prefer (v1beta1 for v0.12.3,
// v1beta2 for v0.17.0) and writes the manager's Configuration in the
// config.kueue.x-k8s.io version of the same name.
//
// Kueue (v0.12.3 as v0.17.0) reads its metrics certificate from the fixed
// path /etc/kueue/metrics/certs when its internal certificate management
// is off. The manager therefore runs in a user and mount namespace of its
// own (unshare) where an overlay over /etc adds that directory; the machine's
// /etc is not touched.
package kueue

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/klog/v2"

	"github.com/kubeflow/mpi-operator/pkg/operator"
	"github.com/kubeflow/mpi-operator/test/harness"
	clientset "github.com/kubeflow/mpi-operator/v2/pkg/client/clientset/versioned"
	"github.com/kubeflow/mpi-operator/v2/pkg/controller"
)

// suite is what every test needs to reach the cluster.
var suite struct {
	*harness.Cluster
	mpi clientset.Interface // kubeflow.org/v2beta1
	// kueue is Kueue's manager; its log is named in failures.
	kueue *harness.Operator
	// kueueAPI is the kueue.x-k8s.io version the tests create and read
	// Kueue's objects in: the one its CRDs prefer.
	kueueAPI string
}

// kueueVersion is the sigs.k8s.io/kueue version under test; hack/kueue.sh
// reads the same variable.
func kueueVersion() string {
	if v := os.Getenv("KUEUE_VERSION"); v != "" {
		return v
	}
	return defaultKueueVersion
}

// defaultKueueVersion is hack/kueue.sh's default.
const defaultKueueVersion = "v0.12.3"

// poll is how the tests wait: every 200 ms, and not past the exit of
// Kueue's manager.
var poll = harness.Poller{Every: 200 * time.Millisecond, Abort: func() string {
	if !suite.kueue.Alive() {
		return "Kueue's manager exited; its log: " + suite.kueue.LogPath
	}
	return ""
}}

// Job pods stay Running until a test ends them: kwok's pod-complete stage
// would otherwise finish every launcher at once.
func TestMain(m *testing.M) {
	harness.Suite{Name: "kueue-" + kueueVersion(), Settings: []string{"KWOK_NODES=2", "KWOK_JOB_PODS_COMPLETE=false"}, QPS: 100, SetUp: setUp}.Run(m)
}

// setUp builds Kueue's manager, installs the CRDs, and starts the MPIJob
// controller and Kueue's manager; the returned func stops both.
func setUp(c *harness.Cluster) (func(), error) {
	suite.Cluster = c
	kueueDir, err := buildKueue(c.Root)
	if err != nil {
		return nil, err
	}
	if suite.mpi, err = clientset.NewForConfig(c.Config); err != nil {
		return nil, err
	}
	meta, err := metadata.NewForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	crds := []string{filepath.Join(c.Root, "v2", "manifests", "base", "crd.yaml"), filepath.Join(kueueDir, "crds")}
	if err := c.ApplyCRDs(ctx, false, crds...); err != nil {
		return cancel, err
	}
	if suite.kueueAPI, err = preferredVersion(c.Kube, "kueue.x-k8s.io"); err != nil {
		return cancel, err
	}
	workloads.Version = suite.kueueAPI
	fmt.Fprintf(os.Stderr, "kueue: Kueue %s, API kueue.x-k8s.io/%s\n", kueueVersion(), suite.kueueAPI)
	// Kueue's default namespace; its manager looks for nothing else there
	// with internal certificate management off, but keep it as deployed.
	if err := c.EnsureNamespace(ctx, "kueue-system"); err != nil {
		return cancel, err
	}
	stopController, err := runController(ctx, c.Dir, c.Kube, meta, suite.mpi)
	if err != nil {
		return cancel, err
	}
	manager, err := startKueue(filepath.Join(kueueDir, "bin", "kueue"), filepath.Join(c.Dir, "kueue-manager"), c.Kubeconfig,
		suite.kueueAPI)
	if err != nil {
		return func() { stopController(); cancel() }, err
	}
	return func() { manager.Terminate(20 * time.Second); stopController(); cancel() }, nil
}

// preferredVersion is the version the API server prefers of an API group.
func preferredVersion(kube kubernetes.Interface, group string) (string, error) {
	groups, err := kube.Discovery().ServerGroups()
	if err != nil {
		return "", err
	}
	for _, g := range groups.Groups {
		if g.Name == group {
			return g.PreferredVersion.Version, nil
		}
	}
	return "", fmt.Errorf("the API server serves no %s", group)
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

// startKueue starts Kueue's manager with its state in dir and waits until
// it is ready; its Configuration is written in config.kueue.x-k8s.io/api.
func startKueue(bin, dir, kubeconfig, api string) (*harness.Operator, error) {
	ports, err := harness.FreePorts(3) // health, metrics, webhook
	if err != nil {
		return nil, err
	}
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
	if err := os.WriteFile(configPath, []byte(kueueConfig(api, certs, ports)), 0o644); err != nil {
		return nil, err
	}
	// unshare execs sh, which execs the manager: one process, whose PID
	// is the command's.
	k, err := harness.StartOperator(context.Background(), harness.OperatorConfig{Bin: "unshare", Args: []string{
		"--user", "--map-root-user", "--mount", "sh", "-c",
		`mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1,workdir=$2" /etc && shift 2 && exec "$@"`,
		"sh", upper, work, bin, "--config", configPath,
	}, ExactArgs: true, Kubeconfig: kubeconfig, LogPath: filepath.Join(dir, "kueue.log")})
	if err != nil {
		return nil, fmt.Errorf("starting Kueue's manager: %w", err)
	}
	suite.kueue = k
	ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[0])
	err = poll.Until(context.Background(), 2*time.Minute, func() (bool, error) {
		code, _, err := harness.Scrape(context.Background(), ready, "")
		return err == nil && code == http.StatusOK, nil
	})
	if err != nil {
		k.Terminate(20 * time.Second)
		return nil, fmt.Errorf("Kueue's manager is not ready (%w); its log: %s", err, k.LogPath)
	}
	return k, nil
}

// kueueConfig is the manager's Configuration in config.kueue.x-k8s.io/api:
// the MPIJob integration only, no leader election, no certificate
// management, every server on the loopback, no visibility API server, and
// waitForPodsReady on with blockAdmission (no other job is admitted while
// an admitted one is not PodsReady; v1beta1's default, which v1beta2 turned
// off), so that a Workload's PodsReady condition, which Kueue derives from
// the MPIJob's Running condition, is kept. v1beta2 has no
// waitForPodsReady.enable: the section's presence turns it on.
func kueueConfig(api, certDir string, ports []int) string {
	enable := ""
	if api == "v1beta1" {
		enable = "\n  enable: true"
	}
	return fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/%s
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
waitForPodsReady:%s
  timeout: 5m
  blockAdmission: true
integrations:
  frameworks:
  - kubeflow.org/mpijob
featureGates:
  # Its API server wants the in-cluster configuration, or exits.
  VisibilityOnDemand: false
`, api, ports[0], ports[1], ports[2], certDir, enable)
}
