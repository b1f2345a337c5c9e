package operator

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/kubeflow/mpi-operator/pkg/metrics"
)

// ServeOptions say how Serve runs a controller.
type ServeOptions struct {
	// MonitoringPort serves /metrics and /healthz on every interface when
	// greater than 0.
	MonitoringPort int
	// MetricsAuth is MetricsAuthNone or MetricsAuthKubernetes (then Kube
	// reviews the callers).
	MetricsAuth string
	// Profiling serves the Go runtime's profiles under /debug/pprof/ on
	// the monitoring port.
	Profiling bool
	// LeaderElect runs the controller only while this replica holds the
	// Lease LeaseName in LockNamespace; off, it runs at once.
	LeaderElect   bool
	LockNamespace string
	LeaseName     string
	// Kube reads and writes the Lease; only needed with LeaderElect.
	Kube kubernetes.Interface
}

// Serve runs a controller until ctx is done, which is a graceful stop and
// returns nil, or until something fails, which returns the error.
//
// The monitoring server, when on, listens before anything else starts (a
// port in use fails Serve) and stops after the controller. run runs the
// controller until its context is done, and publishes it in running while
// it runs, so that /healthz asks it; it returns nil on a stop. With leader
// election run is called each time this replica becomes the leader, an
// error or an early return of run gives up the Lease and is returned, and
// losing the Lease outside a stop exits the process with status 1 (see
// Elector). metrics.IsLeader is 1 while run may run.
func Serve(ctx context.Context, o ServeOptions, run func(ctx context.Context, running *RunningController) error) error {
	running := &RunningController{}
	if o.MonitoringPort > 0 {
		mon, err := startMonitoring(o, running)
		if err != nil {
			return err
		}
		defer mon.Stop()
	}

	lead := func(ctx context.Context) error { return run(ctx, running) }

	if !o.LeaderElect {
		klog.InfoS("Leader election is off; running the controller directly")
		metrics.IsLeader.Set(1)
		defer metrics.IsLeader.Set(0)
		return lead(ctx)
	}

	e := &Elector{
		Client:    o.Kube,
		Namespace: o.LockNamespace,
		Name:      o.LeaseName,
		Lead:      lead,
	}
	return e.Run(ctx)
}

// SignalContext returns a context that SIGTERM or SIGINT cancels, which
// starts a graceful stop, and logs that such a signal arrived. After the
// first signal the default handling is back, so a second one kills the
// process at once. The context is also done when parent is, or when stop
// is called; call stop when done to release the signals.
func SignalContext(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, os.Interrupt)
	go func() {
		defer signal.Stop(signals)
		select {
		case <-signals:
			signal.Stop(signals)
			klog.InfoS("Received a stop signal; shutting down")
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// startMonitoring starts the monitoring port as o says.
func startMonitoring(o ServeOptions, running *RunningController) (*MonitoringServer, error) {
	h := NewMonitoringHandler(running, o.Profiling)
	var tlsConfig *tls.Config
	if o.MetricsAuth == MetricsAuthKubernetes {
		var err error
		if tlsConfig, err = selfSignedTLS(); err != nil {
			return nil, fmt.Errorf("making the monitoring port's certificate: %w", err)
		}
		h = RequireKubernetesAuth(h, o.Kube)
	}
	mon, err := StartMonitoring(fmt.Sprintf(":%d", o.MonitoringPort), h, tlsConfig)
	if err != nil {
		return nil, err
	}
	if tlsConfig != nil {
		klog.InfoS("Serving /metrics and /healthz over HTTPS; /metrics to callers the API server authorizes", "address", mon.Addr())
	} else {
		klog.InfoS("Serving /metrics and /healthz", "address", mon.Addr())
	}
	return mon, nil
}
