package operator

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"

	"github.com/kubeflow/mpi-operator/pkg/metrics"
)

// monitoringShutdownTimeout bounds how long in-flight scrapes may take once
// the operator is stopping.
const monitoringShutdownTimeout = 5 * time.Second

// HealthChecker is what /healthz asks of the controller.
type HealthChecker interface {
	// Healthy returns nil, or a one-line reason why the controller is stuck.
	Healthy() error
}

// RunningController holds the controller this replica runs, if any, for
// /healthz. The monitoring server outlives the controllers: with leader
// election a replica may run one after another, each time it leads. The
// zero value holds none and is ready to use.
type RunningController struct {
	current atomic.Pointer[HealthChecker]
}

// Set publishes c as the running controller.
func (r *RunningController) Set(c HealthChecker) { r.current.Store(&c) }

// Clear records that no controller runs.
func (r *RunningController) Clear() { r.current.Store(nil) }

// Current returns the running controller, or nil when none runs.
func (r *RunningController) Current() HealthChecker {
	if c := r.current.Load(); c != nil {
		return *c
	}
	return nil
}

// Healthy asks the running controller. With none running, the replica
// stands by for the leader Lease or is starting, and is healthy.
func (r *RunningController) Healthy() error {
	if c := r.Current(); c != nil {
		return c.Healthy()
	}
	return nil
}

// NewMonitoringHandler serves /metrics from a registry of its own (the
// operator's metrics of pkg/metrics plus the Go runtime and process
// collectors) and /healthz. /healthz answers 200 "ok" unless health reports
// the controller stuck, when it answers 500 with the reason, so that a
// liveness probe restarts the operator. With profiling, it also serves the
// Go runtime's profiles under /debug/pprof/.
func NewMonitoringHandler(health HealthChecker, profiling bool) http.Handler {
	reg := prometheus.NewRegistry()
	metrics.Register(reg)
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := health.Healthy(); err != nil {
			klog.ErrorS(err, "Answering /healthz with a failure")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, err.Error())
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// MonitoringServer is the HTTP server of the monitoring port.
type MonitoringServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// StartMonitoring listens on addr and serves h in the background, over TLS
// with tlsConfig unless it is nil. Listening happens before it returns, so a
// port in use fails the start.
func StartMonitoring(addr string, h http.Handler, tlsConfig *tls.Config) (*MonitoringServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on the monitoring port: %w", err)
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	m := &MonitoringServer{
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       2 * time.Minute,
		},
		ln:   ln,
		done: make(chan struct{}),
	}
	go func() {
		defer close(m.done)
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "Monitoring server stopped", "address", ln.Addr().String())
		}
	}()
	return m, nil
}

// Addr is the address the server listens on.
func (m *MonitoringServer) Addr() string { return m.ln.Addr().String() }

// Stop lets in-flight requests finish (for a few seconds at most), closes
// the server and waits for it to be gone.
func (m *MonitoringServer) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), monitoringShutdownTimeout)
	defer cancel()
	if err := m.srv.Shutdown(ctx); err != nil {
		klog.ErrorS(err, "Monitoring server did not shut down cleanly")
		_ = m.srv.Close()
	}
	<-m.done
}
