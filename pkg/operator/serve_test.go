package operator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	kubefake "k8s.io/client-go/kubernetes/fake"
)

func TestServeWithoutLeaderElection(t *testing.T) {
	boom := errors.New("caches never synced")
	var ran atomic.Bool
	err := Serve(context.Background(), ServeOptions{}, func(_ context.Context, running *RunningController) error {
		ran.Store(true)
		if running == nil {
			t.Error("run got no RunningController")
		}
		if v := isLeaderGauge(t); v != "1" {
			t.Errorf("mpi_operator_is_leader = %s while running, want 1", v)
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("Serve() = %v, want %v", err, boom)
	}
	if !ran.Load() {
		t.Error("Serve() did not run the controller")
	}
	if v := isLeaderGauge(t); v != "0" {
		t.Errorf("mpi_operator_is_leader = %s after the run, want 0", v)
	}
}

func TestServeWithLeaderElection(t *testing.T) {
	kube := kubefake.NewClientset()
	started := make(chan struct{})
	o := ServeOptions{LeaderElect: true, LockNamespace: "kubeflow", LeaseName: "mpi-operator-v2", Kube: kube}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, o, func(ctx context.Context, _ *RunningController) error {
			close(started)
			<-ctx.Done()
			return nil
		})
	}()

	waitClosed(t, started, "the controller to start")
	if h := leaseHolderOf(t, kube, "kubeflow", "mpi-operator-v2"); h == "" {
		t.Error("the controller runs, but the Lease has no holder")
	}
	stopLeading(t, cancel, done, kube, "kubeflow", "mpi-operator-v2")
}

func TestServeLeaderElectionNeedsALease(t *testing.T) {
	err := Serve(context.Background(), ServeOptions{LeaderElect: true, LeaseName: "mpi-operator"},
		func(context.Context, *RunningController) error {
			t.Error("the controller ran without a Lease")
			return nil
		})
	if err == nil || !strings.Contains(err.Error(), "configuring leader election") {
		t.Errorf("Serve() = %v, want a configuration error", err)
	}
}

// freePort returns a TCP port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestServeMonitoring asks /healthz while the controller runs, and checks
// that the monitoring server is gone once Serve has returned.
func TestServeMonitoring(t *testing.T) {
	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	published := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ServeOptions{MonitoringPort: port}, func(ctx context.Context, running *RunningController) error {
			running.Set(fakeChecker{errors.New("a sync has been running for 3m1s")})
			defer running.Clear()
			close(published)
			<-ctx.Done()
			return nil
		})
	}()

	waitClosed(t, published, "the controller to be published")
	if code, body := get(t, base+"/healthz"); code != http.StatusInternalServerError || body != "a sync has been running for 3m1s" {
		t.Errorf("/healthz = %d %q, want the running controller's failure", code, body)
	}
	cancel()
	if err := waitErr(t, done, "Serve to return"); err != nil {
		t.Fatalf("Serve() = %v after a stop, want nil", err)
	}
	if resp, err := http.Get(base + "/healthz"); err == nil {
		_ = resp.Body.Close()
		t.Error("the monitoring server still answers after Serve returned")
	}
}

func TestServeMonitoringPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	o := ServeOptions{MonitoringPort: ln.Addr().(*net.TCPAddr).Port}
	err = Serve(context.Background(), o, func(context.Context, *RunningController) error {
		t.Error("the controller ran although the monitoring port is in use")
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "listening on the monitoring port") {
		t.Errorf("Serve() = %v, want the port in use", err)
	}
}

func TestSignalContextStops(t *testing.T) {
	ctx, stop := SignalContext(context.Background())
	if ctx.Err() != nil {
		t.Fatal("the context is done before any signal")
	}
	stop()
	waitClosed(t, ctx.Done(), "stop to end the context")

	parent, cancel := context.WithCancel(context.Background())
	ctx, stop = SignalContext(parent)
	defer stop()
	cancel()
	waitClosed(t, ctx.Done(), "the parent to end the context")
}

func TestSignalContextOnSIGTERM(t *testing.T) {
	ctx, stop := SignalContext(context.Background())
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, ctx.Done(), "SIGTERM to end the context")
}
