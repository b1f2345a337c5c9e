package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
)

// Suite is a test suite's control plane: hack/cluster-up.sh's, in
// <repository>/_output/<Name>, on ports free when it starts, so that suites
// (and the same suite in two checkouts) run side by side. With
// MPI_OPERATOR_KUBE_VERSION set (KubeVersionEnv), the control plane is of
// that Kubernetes version, in _output/<Name>-k8s-<version>.
type Suite struct {
	Name     string   // the cluster's directory, and what progress lines start with
	Settings []string // more settings of hack/cluster-up.sh: KWOK_NODES, ...
	// KwokServer has kwok serve exec and logs of the simulated pods on a
	// free port (KWOK_SERVER_PORT).
	KwokServer bool
	// QPS is the client-side limit of the admin clients (Cluster.Config,
	// which the suites' in-process controllers copy); 0 is 1000.
	QPS float32
	// SetUp runs once the cluster is up, before the tests; what it returns
	// (when not nil) runs after them, even when SetUp failed.
	SetUp func(c *Cluster) (tearDown func(), err error)
}

// Run is a suite's TestMain: it starts the cluster afresh (stopping what
// an earlier run left in its directory; an empty etcd; a kubectl discovery
// cache of this run, since an earlier run's names API versions this one
// may not serve), runs SetUp and the tests, and stops it all, leaving the
// cluster up when the environment sets KEEP_CLUSTER. It exits the process
// with the tests' status, or 1 when the set-up failed.
func (s Suite) Run(m *testing.M) {
	os.Exit(s.run(m))
}

func (s Suite) run(m *testing.M) int {
	logf := NewLogf(s.Name)
	c, err := s.start(logf)
	defer c.Stop(os.Getenv("KEEP_CLUSTER") != "")
	if err == nil && s.SetUp != nil {
		var tearDown func()
		tearDown, err = s.SetUp(c)
		if tearDown != nil {
			defer tearDown()
		}
	}
	if err != nil {
		logf("%v", err)
		return 1
	}
	return m.Run()
}

// KubeVersionEnv names the environment variable that picks, for
// hack/testbin.sh and hack/cluster-up.sh, a Kubernetes version of
// hack/lib/versions.sh's KUBE_COMPAT_VERSIONS in place of the pinned one
// (make test-compat, docs/compatibility.md); the suites' processes pass it
// on to the scripts.
const KubeVersionEnv = "MPI_OPERATOR_KUBE_VERSION"

func (s Suite) start(logf Logf) (*Cluster, error) {
	root, err := FindRoot()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, "_output", s.Name)
	version := os.Getenv(KubeVersionEnv)
	if version != "" {
		dir += "-k8s-" + version
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(filepath.Join(dir, "kubectl-cache")); err != nil {
		return nil, err
	}
	if err := os.Setenv("KUBECACHEDIR", filepath.Join(dir, "kubectl-cache")); err != nil {
		return nil, err
	}
	settings := s.Settings
	if s.KwokServer {
		port, err := FreePorts(1)
		if err != nil {
			return nil, err
		}
		settings = append(settings, fmt.Sprintf("KWOK_SERVER_PORT=%d", port[0]))
	}
	c, err := StartCluster(context.Background(), root, dir, s.Name, settings, logf)
	if err == nil && version != "" {
		err = c.checkVersion(version)
	}
	if err == nil && s.QPS != 0 {
		err = c.SetQPS(c.Config, s.QPS)
	}
	return c, err
}

// checkVersion makes sure that the API server and the kubectl of the
// cluster are of the version a suite was asked to run on.
func (c *Cluster) checkVersion(want string) error {
	server, err := c.Kube.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("asking the API server its version: %w", err)
	}
	out, err := exec.Command(c.Kubectl, "version", "--client", "-o", "json").Output()
	if err != nil {
		return fmt.Errorf("asking %s its version: %w", c.Kubectl, err)
	}
	var client struct {
		ClientVersion struct {
			GitVersion string `json:"gitVersion"`
		} `json:"clientVersion"`
	}
	if err := json.Unmarshal(out, &client); err != nil {
		return fmt.Errorf("reading the version of %s: %w", c.Kubectl, err)
	}
	if server.GitVersion != want || client.ClientVersion.GitVersion != want {
		return fmt.Errorf("%s=%s, but the API server is %s and kubectl %s", KubeVersionEnv, want, server.GitVersion, client.ClientVersion.GitVersion)
	}
	c.logf("Kubernetes %s: the API server and kubectl (%s)", want, KubeVersionEnv)
	return nil
}

// The ports FreePorts hands out: below Linux's ephemeral range
// (32768-60999), where any outgoing connection could take a port between
// the check and the bind.
const (
	portFirst = 20000
	portLast  = 32000
)

// FreePorts returns n ports of 127.0.0.1 that nothing listens on, claimed
// for this process (ClaimPorts).
func FreePorts(n int) ([]int, error) { return ClaimPorts(os.Getpid(), n) }

// ClaimPorts returns n ports of 127.0.0.1 that nothing listens on, and
// claims them for the process owner for as long as it lives: a file a
// port in the machine's temporary directory names its owner, so that no
// run of the harness (a suite, bench, chaos, the SDK's tests through
// hack/freeports) started meanwhile takes them, even before they are bound.
func ClaimPorts(owner, n int) ([]int, error) {
	dir, err := portsDir()
	if err != nil {
		return nil, err
	}
	var ports []int
	first := mathrand.IntN(portLast - portFirst + 1)
	for i := 0; i <= portLast-portFirst && len(ports) < n; i++ {
		if port := portFirst + (first+i)%(portLast-portFirst+1); claimPort(dir, port, owner) {
			ports = append(ports, port)
		}
	}
	if len(ports) < n {
		return nil, fmt.Errorf("no %d free ports in %d-%d", n, portFirst, portLast)
	}
	return ports, nil
}

// ClaimPort claims one given port for this process, as FreePorts claims
// the ports it hands out, for a program that listens on a fixed port of its
// own; it fails when another live process holds the claim, or when the port
// does not bind. The claim lasts as long as the process.
func ClaimPort(port int) error {
	dir, err := portsDir()
	if err != nil {
		return err
	}
	if !claimPort(dir, port, os.Getpid()) {
		return fmt.Errorf("port %d is claimed by a live process (%s) or in use", port, filepath.Join(dir, strconv.Itoa(port)))
	}
	return nil
}

// portsDir is where the claims live: a directory of the machine's
// temporary directory, which any user's runs write.
func portsDir() (string, error) {
	dir := filepath.Join(os.TempDir(), "mpi-operator-ports")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	_ = os.Chmod(dir, 0o1777) // like /tmp: any user's runs claim ports here
	return dir, nil
}

// claimPort claims a port for owner unless a live process has it, or it
// does not bind. The port's file is locked meanwhile, so that two
// processes never claim a port at once.
func claimPort(dir string, port, owner int) bool {
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return false
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX) != nil {
		return false
	}
	b, err := io.ReadAll(f)
	if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); err != nil || (pid > 0 && alive(pid)) {
		return false
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	ln.Close()
	_ = os.Chmod(f.Name(), 0o666)
	return f.Truncate(0) == nil && writeAt(f, strconv.Itoa(owner)+"\n") == nil
}

func writeAt(f *os.File, s string) error {
	_, err := f.WriteAt([]byte(s), 0)
	return err
}

// Poller polls a check until it holds.
type Poller struct {
	Every time.Duration // 100 ms when 0
	// Abort, when set, is asked before each check: a reason other than ""
	// ends the wait at once, since nothing would change any more (the
	// process that would make the change has exited, say).
	Abort func() string
}

// ErrTimeout is what Until returns when the timeout has passed.
var ErrTimeout = errors.New("timed out")

// Until calls done until it reports true or an error, ctx ends, Abort
// gives a reason, or timeout passes (ErrTimeout).
func (p Poller) Until(ctx context.Context, timeout time.Duration, done func() (bool, error)) error {
	every := p.Every
	if every == 0 {
		every = 100 * time.Millisecond
	}
	deadline := time.Now().Add(timeout)
	for {
		if p.Abort != nil {
			if why := p.Abort(); why != "" {
				return errors.New(why)
			}
		}
		if ok, err := done(); ok || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return ErrTimeout
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

// Retry calls f until it returns nil, for at most timeout; the error then
// is f's last.
func (p Poller) Retry(ctx context.Context, timeout time.Duration, f func() error) error {
	var last error
	err := p.Until(ctx, timeout, func() (bool, error) {
		last = f()
		return last == nil, nil
	})
	if errors.Is(err, ErrTimeout) && last != nil {
		return fmt.Errorf("after %s: %w", timeout, last)
	}
	return err
}

// Eventually waits, at most timeout, until check reports done, and fails t
// otherwise, with what check last saw: a string, or an error, which also
// ends the wait at once. It logs how long the wait took, and every 15 s of
// a long wait what check sees.
func Eventually[S any](t testing.TB, p Poller, timeout time.Duration, what string, check func() (bool, S)) {
	t.Helper()
	var seen S
	start := time.Now()
	report := start.Add(15 * time.Second)
	err := p.Until(context.Background(), timeout, func() (bool, error) {
		var ok bool
		ok, seen = check()
		if err, isErr := any(seen).(error); isErr && err != nil {
			return false, err
		}
		if !ok && time.Now().After(report) {
			t.Logf("still waiting for %s (%s); seen: %v", what, time.Since(start).Round(time.Second), seen)
			report = report.Add(15 * time.Second)
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting %s for %s: %v; last seen:\n%v", time.Since(start).Round(10*time.Millisecond), what, err, seen)
	}
	t.Logf("%s: after %s", what, time.Since(start).Round(10*time.Millisecond))
}

// Namespace creates a namespace for t, named after it, waits for its
// default ServiceAccount (pods are refused until it exists), and deletes it
// once t is over, unless the environment sets KEEP_NAMESPACES.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	name := nonLabel.ReplaceAllString(strings.ToLower(t.Name()), "-")
	name = strings.Trim(name[:min(len(name), 50)], "-") + "-" + rand.String(5)
	ctx := context.Background()
	if err := c.EnsureNamespace(ctx, name); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		if os.Getenv("KEEP_NAMESPACES") != "" {
			return
		}
		if err := c.Kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Logf("deleting namespace %s: %v", name, err)
		}
	})
	return name
}

// nonLabel is what a DNS label may not hold.
var nonLabel = regexp.MustCompile(`[^a-z0-9-]+`)
