package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	volcanoclient "volcano.sh/apis/pkg/client/clientset/versioned"

	clientset "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned"
	"github.com/kubeflow/mpi-operator/pkg/controller"
	"github.com/kubeflow/mpi-operator/pkg/metrics"
	"github.com/kubeflow/mpi-operator/pkg/version"
)

const (
	userAgent = "mpi-operator"
	// leaseName is the name of the leader-election Lease in --lock-namespace.
	leaseName = "mpi-operator"

	mpiJobGroupVersion   = "kubeflow.org/v1"
	mpiJobResource       = "mpijobs"
	podGroupGroupVersion = "scheduling.volcano.sh/v1beta1"
	podGroupResource     = "podgroups"

	// discoveryTimeout bounds the start-up CRD checks, so that an
	// unreachable API server fails the start instead of hanging it.
	discoveryTimeout = 30 * time.Second
	// monitoringShutdownTimeout bounds how long in-flight scrapes may take
	// once the operator is stopping.
	monitoringShutdownTimeout = 5 * time.Second
)

// leaseTimings are the leader-election intervals.
type leaseTimings struct {
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// defaultLeaseTimings keep the idle API traffic of leader election low.
//
// The leader renews the Lease every RetryPeriod with a single update: 12
// writes a minute (client-go's usual 2 s period costs 30). Each standby reads
// the Lease every 5-6 s (RetryPeriod plus up to 20% jitter) and never writes.
//
// A leader whose renewals fail gives up at most RetryPeriod+RenewDeadline =
// 15 s after its last successful renewal and exits, which is before the
// 20 s LeaseDuration lets a standby take over, so two controllers never
// overlap. After a crash a standby takes over within about 26 s; after a
// graceful stop the Lease is released and the takeover takes about 6 s.
var defaultLeaseTimings = leaseTimings{
	LeaseDuration: 20 * time.Second,
	RenewDeadline: 10 * time.Second,
	RetryPeriod:   5 * time.Second,
}

// clients bundles the API clients of the operator.
type clients struct {
	kube    kubernetes.Interface
	events  kubernetes.Interface // the same API, its own rate limits
	meta    metadata.Interface   // objects' metadata only, for caches of other pods
	mpi     clientset.Interface
	volcano volcanoclient.Interface // nil when gang scheduling is off
}

// Run starts the operator with validated options and blocks until ctx is
// cancelled, which is a graceful stop and returns nil, or until something
// fails, which returns the error. Losing the leader Lease outside a stop
// exits the process with status 1.
func Run(ctx context.Context, opts *Options) error {
	klog.InfoS("Starting mpi-operator", "version", version.String(),
		"namespace", namespaceForLog(opts.Namespace), "threadiness", opts.Threadiness,
		"gangScheduling", opts.GangSchedulerName, "leaderElect", opts.LeaderElect,
		"qps", opts.QPS, "burst", opts.Burst)

	cfg, err := buildRestConfig(opts)
	if err != nil {
		return err
	}
	cs, err := newClients(cfg, opts.GangSchedulerName != "")
	if err != nil {
		return err
	}

	dcfg := rest.CopyConfig(cfg)
	dcfg.Timeout = discoveryTimeout
	disc, err := discovery.NewDiscoveryClientForConfig(dcfg)
	if err != nil {
		return fmt.Errorf("creating the discovery client: %w", err)
	}
	if err := checkMPIJobCRD(disc); err != nil {
		return err
	}
	if opts.GangSchedulerName != "" {
		if err := checkPodGroupCRD(disc, opts.GangSchedulerName); err != nil {
			return err
		}
	}

	running := &runningController{}
	if opts.MonitoringPort > 0 {
		mon, err := startMonitoring(fmt.Sprintf(":%d", opts.MonitoringPort), newMonitoringHandler(running))
		if err != nil {
			return err
		}
		klog.InfoS("Serving /metrics and /healthz", "address", mon.Addr())
		defer mon.Stop()
	}

	run := func(ctx context.Context) error { return runController(ctx, cs, opts, running) }

	if !opts.LeaderElect {
		klog.InfoS("Leader election is off; running the controller directly")
		metrics.IsLeader.Set(1)
		defer metrics.IsLeader.Set(0)
		return run(ctx)
	}

	e := &elector{
		coordination: cs.kube,
		namespace:    opts.LockNamespace,
		name:         leaseName,
		identity:     leaderIdentity(),
		timings:      defaultLeaseTimings,
		run:          run,
		exit:         func(code int) { klog.FlushAndExit(klog.ExitFlushTimeout, code) },
	}
	return e.Run(ctx)
}

func namespaceForLog(ns string) string {
	if ns == "" {
		return "(all)"
	}
	return ns
}

// buildRestConfig returns the client configuration: in-cluster when neither
// a kubeconfig nor a master URL is given, otherwise from the kubeconfig
// (several paths, separated like $PATH, are merged as kubectl does) with the
// master URL overriding its server. QPS, burst and user agent are applied.
func buildRestConfig(o *Options) (*rest.Config, error) {
	var cfg *rest.Config
	if o.KubeConfig == "" && o.MasterURL == "" {
		c, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeConfig, --master or $%s given, and the in-cluster configuration is not available: %w", EnvKubeConfig, err)
		}
		cfg = c
	} else {
		rules := &clientcmd.ClientConfigLoadingRules{}
		if paths := filepath.SplitList(o.KubeConfig); len(paths) > 1 {
			rules.Precedence = paths
		} else {
			rules.ExplicitPath = o.KubeConfig
		}
		overrides := &clientcmd.ConfigOverrides{}
		overrides.ClusterInfo.Server = o.MasterURL
		c, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("loading the client configuration (kubeconfig %q, master %q): %w", o.KubeConfig, o.MasterURL, err)
		}
		cfg = c
	}
	cfg.QPS = o.QPS
	cfg.Burst = o.Burst
	cfg.UserAgent = userAgent
	return cfg, nil
}

// newClients creates the API clients. The built-in types are spoken in
// protobuf, which is cheaper to decode than JSON; custom resources only
// support JSON, so the MPIJob and volcano clients keep the default.
func newClients(cfg *rest.Config, gang bool) (clients, error) {
	var cs clients
	kcfg := rest.CopyConfig(cfg)
	kcfg.ContentType = runtime.ContentTypeProtobuf
	kcfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	kube, err := kubernetes.NewForConfig(kcfg)
	if err != nil {
		return cs, fmt.Errorf("creating the Kubernetes client: %w", err)
	}
	cs.kube = kube
	// Events get a client, and so a rate limiter, of their own.
	if cs.events, err = kubernetes.NewForConfig(kcfg); err != nil {
		return cs, fmt.Errorf("creating the events client: %w", err)
	}
	if cs.meta, err = metadata.NewForConfig(cfg); err != nil {
		return cs, fmt.Errorf("creating the metadata client: %w", err)
	}
	mpi, err := clientset.NewForConfig(cfg)
	if err != nil {
		return cs, fmt.Errorf("creating the MPIJob client: %w", err)
	}
	cs.mpi = mpi
	if gang {
		vc, err := volcanoclient.NewForConfig(cfg)
		if err != nil {
			return cs, fmt.Errorf("creating the volcano client: %w", err)
		}
		cs.volcano = vc
	}
	return cs, nil
}

// servedResources returns the resource names (subresources included, such
// as "mpijobs/status") the API server serves in groupVersion; an empty map
// when it does not serve the group version at all.
func servedResources(d discovery.DiscoveryInterface, groupVersion string) (map[string]bool, error) {
	list, err := d.ServerResourcesForGroupVersion(groupVersion)
	if apierrors.IsNotFound(err) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, err
	}
	names := make(map[string]bool, len(list.APIResources))
	for _, r := range list.APIResources {
		names[r.Name] = true
	}
	return names, nil
}

// checkMPIJobCRD fails unless the API server serves MPIJobs with their
// status subresource.
func checkMPIJobCRD(d discovery.DiscoveryInterface) error {
	names, err := servedResources(d, mpiJobGroupVersion)
	if err != nil {
		return fmt.Errorf("checking whether the MPIJob CRD is installed: cannot list the resources of %s: %w", mpiJobGroupVersion, err)
	}
	if !names[mpiJobResource] {
		return fmt.Errorf("the MPIJob CRD is not installed: the API server does not serve %s in %s. "+
			"Install the CRD with `kubectl apply -f manifests/base/crd.yaml`, or the CRD and the operator with "+
			"`kubectl apply -k manifests/overlays/standalone`, then start the operator again",
			mpiJobResource, mpiJobGroupVersion)
	}
	if !names[mpiJobResource+"/status"] {
		return errors.New("the installed MPIJob CRD has no status subresource, so the operator cannot report job status. " +
			"Update it with `kubectl apply -f manifests/base/crd.yaml`, then start the operator again")
	}
	return nil
}

// checkPodGroupCRD fails unless the API server serves volcano PodGroups,
// which gang scheduling creates.
func checkPodGroupCRD(d discovery.DiscoveryInterface, scheduler string) error {
	names, err := servedResources(d, podGroupGroupVersion)
	if err != nil {
		return fmt.Errorf("checking whether the volcano PodGroup CRD is installed: cannot list the resources of %s: %w", podGroupGroupVersion, err)
	}
	if !names[podGroupResource] {
		return fmt.Errorf("--gang-scheduling=%s needs volcano, but the API server does not serve %s in %s. "+
			"Install volcano (https://volcano.sh/en/docs/installation/), or start the operator without --gang-scheduling",
			scheduler, podGroupResource, podGroupGroupVersion)
	}
	return nil
}

// runController runs the MPIJob controller until ctx is done, publishing it
// in running meanwhile. It returns nil on a stop and an error when the
// controller fails or returns early.
func runController(ctx context.Context, cs clients, o *Options, running *runningController) error {
	cfg := controller.Config{
		Namespace:            o.Namespace,
		KubectlDeliveryImage: o.KubectlDeliveryImage,
		GangSchedulerName:    o.GangSchedulerName,
		RefreshLauncher:      o.RefreshLauncher,
	}
	var vc volcanoclient.Interface // a nil interface, not a typed nil pointer
	if cs.volcano != nil {
		vc = cs.volcano
	}
	// The informers get a context of their own, so that they stop, and
	// their watches close, before this function returns, whatever made the
	// controller return.
	infCtx, stopInformers := context.WithCancel(ctx)
	cfg.EventClient = cs.events
	inf := controller.NewInformers(cs.kube, cs.meta, cs.mpi, vc, cfg)
	defer func() {
		stopInformers()
		inf.Shutdown()
	}()
	c := controller.NewMPIJobController(ctx, cs.kube, cs.mpi, vc, inf, cfg)
	running.set(c)
	defer running.clear()
	inf.Start(infCtx.Done())
	err := c.Run(ctx, o.Threadiness)
	if ctx.Err() != nil {
		// Stopping; an error here is the wait for the caches being cut short.
		if err != nil {
			klog.V(2).InfoS("Controller stopped", "err", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("running the MPIJob controller: %w", err)
	}
	return errors.New("the MPIJob controller stopped unexpectedly")
}

// healthChecker is what /healthz asks of the controller.
type healthChecker interface {
	// Healthy returns nil, or a one-line reason why the controller is stuck.
	Healthy() error
}

// runningController holds the controller this replica runs, if any, for
// /healthz. The monitoring server outlives the controllers: with leader
// election a replica may run one after another, each time it leads.
type runningController struct {
	current atomic.Pointer[healthChecker]
}

// set publishes c as the running controller.
func (r *runningController) set(c healthChecker) { r.current.Store(&c) }

// clear records that no controller runs.
func (r *runningController) clear() { r.current.Store(nil) }

// healthy asks the running controller. With none running, the replica
// stands by for the leader Lease or is starting, and is healthy.
func (r *runningController) healthy() error {
	if c := r.current.Load(); c != nil {
		return (*c).Healthy()
	}
	return nil
}

// newMonitoringHandler serves /metrics from a registry of its own (the
// operator's metrics plus the Go runtime and process collectors) and
// /healthz. /healthz answers 200 "ok" unless the running controller is
// stuck, when it answers 500 with the reason, so that a liveness probe
// restarts the operator.
func newMonitoringHandler(running *runningController) http.Handler {
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
		if err := running.healthy(); err != nil {
			klog.ErrorS(err, "Answering /healthz with a failure")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, err.Error())
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	return mux
}

// monitoringServer is the HTTP server of the monitoring port.
type monitoringServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// startMonitoring listens on addr and serves h in the background. Listening
// happens before it returns, so a port in use fails the start.
func startMonitoring(addr string, h http.Handler) (*monitoringServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on the monitoring port: %w", err)
	}
	m := &monitoringServer{
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
func (m *monitoringServer) Addr() string { return m.ln.Addr().String() }

// Stop lets in-flight requests finish (for a few seconds at most), closes
// the server and waits for it to be gone.
func (m *monitoringServer) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), monitoringShutdownTimeout)
	defer cancel()
	if err := m.srv.Shutdown(ctx); err != nil {
		klog.ErrorS(err, "Monitoring server did not shut down cleanly")
		_ = m.srv.Close()
	}
	<-m.done
}

// leaderIdentity names this replica in the Lease: the host (the pod name in
// a cluster) plus a random suffix, so that a restarted container never
// passes for its predecessor.
func leaderIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "mpi-operator"
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails on supported platforms
	return host + "_" + hex.EncodeToString(b)
}

// elector runs a function only while holding the leader Lease.
type elector struct {
	coordination kubernetes.Interface
	namespace    string
	name         string
	identity     string
	timings      leaseTimings
	// run is what the Lease guards; it must return soon after its context
	// is done.
	run func(ctx context.Context) error
	// exit ends the process; it is called when the Lease is lost while the
	// operator is not stopping.
	exit func(code int)
}

// errLeaseLost is returned by elector.Run when the Lease was lost and exit
// returned (only in tests: the real exit does not return).
var errLeaseLost = errors.New("lost the leader lease")

// Run campaigns for the Lease until ctx is done. While leading it runs
// e.run. On ctx done it waits for e.run to return and only then releases the
// Lease, so a successor never overlaps with it. It returns nil after a stop,
// e.run's error when that fails while leading, and errLeaseLost.
func (e *elector) Run(ctx context.Context) error {
	lock := &explainingLock{
		Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: e.namespace, Name: e.name},
			Client:     e.coordination.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: e.identity},
		},
		namespace: e.namespace,
	}

	// The election has a context of its own: cancelling it releases the
	// Lease, which must wait until the guarded code has stopped.
	electionCtx, cancelElection := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelElection()
	var stopping atomic.Bool
	stopElection := func() {
		stopping.Store(true)
		cancelElection()
	}

	var (
		mu      sync.Mutex
		closed  bool // no new run may start
		running sync.WaitGroup
		runErr  error
	)

	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            e.name,
		LeaseDuration:   e.timings.LeaseDuration,
		RenewDeadline:   e.timings.RenewDeadline,
		RetryPeriod:     e.timings.RetryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaseCtx context.Context) {
				mu.Lock()
				if closed || ctx.Err() != nil {
					mu.Unlock()
					return
				}
				running.Add(1)
				mu.Unlock()
				defer running.Done()

				metrics.IsLeader.Set(1)
				klog.InfoS("Became the leader; starting the controller", "lease", klog.KRef(e.namespace, e.name), "identity", e.identity)
				runCtx, cancel := context.WithCancel(ctx)
				defer cancel()
				stop := context.AfterFunc(leaseCtx, cancel)
				defer stop()

				err := e.run(runCtx)
				if ctx.Err() == nil && leaseCtx.Err() == nil {
					// The guarded code ended on its own: give up the Lease
					// and report why.
					if err == nil {
						err = errors.New("the controller stopped unexpectedly")
					}
					mu.Lock()
					runErr = err
					mu.Unlock()
					stopElection()
				}
			},
			OnStoppedLeading: func() {
				metrics.IsLeader.Set(0)
				if stopping.Load() {
					klog.InfoS("Left leader election", "lease", klog.KRef(e.namespace, e.name), "identity", e.identity)
					return
				}
				klog.ErrorS(nil, "Lost the leader lease; exiting so that the restarted operator lists the cluster state afresh",
					"lease", klog.KRef(e.namespace, e.name), "identity", e.identity)
				e.exit(1)
			},
			OnNewLeader: func(identity string) {
				if identity != e.identity {
					klog.InfoS("Another replica leads; standing by", "leader", identity, "lease", klog.KRef(e.namespace, e.name))
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("configuring leader election: %w", err)
	}

	go func() {
		select {
		case <-ctx.Done():
		case <-electionCtx.Done():
			return
		}
		mu.Lock()
		closed = true
		mu.Unlock()
		running.Wait()
		stopElection()
	}()

	klog.InfoS("Waiting to become the leader", "lease", klog.KRef(e.namespace, e.name), "identity", e.identity)
	le.Run(electionCtx)

	mu.Lock()
	closed = true
	err = runErr
	mu.Unlock()
	running.Wait()
	switch {
	case err != nil:
		return err
	case !stopping.Load():
		return errLeaseLost
	default:
		return nil
	}
}

// explainingLock adds a hint to the Lease errors whose cause is a setup
// mistake (a missing lock namespace, missing RBAC); client-go logs the bare
// API error and retries every RetryPeriod, and that retry goes on.
type explainingLock struct {
	resourcelock.Interface
	namespace string

	mu       sync.Mutex
	lastHint time.Time
}

// hintInterval limits the hints to one a minute.
const hintInterval = time.Minute

func (l *explainingLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	if err != nil && !apierrors.IsNotFound(err) { // NotFound: no Lease yet, it gets created
		l.explain("get", err)
	}
	return rec, raw, err
}

func (l *explainingLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, rec)
	if err != nil {
		l.explain("create", err)
	}
	return err
}

func (l *explainingLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, rec)
	if err != nil {
		l.explain("update", err)
	}
	return err
}

func (l *explainingLock) explain(verb string, err error) {
	hint := leaseErrorHint(verb, l.namespace, err)
	if hint == "" {
		return
	}
	l.mu.Lock()
	now := time.Now()
	due := l.lastHint.IsZero() || now.Sub(l.lastHint) >= hintInterval
	if due {
		l.lastHint = now
	}
	l.mu.Unlock()
	if due {
		klog.ErrorS(err, hint, "lease", klog.KRef(l.namespace, leaseName))
	}
}

// leaseErrorHint explains a failed Lease request whose cause the user has to
// fix, or returns "" for other errors.
func leaseErrorHint(verb, namespace string, err error) string {
	switch {
	case verb == "create" && apierrors.IsNotFound(err):
		return fmt.Sprintf("Cannot create the leader-election Lease: the lock namespace %q does not exist. "+
			"Create it, or point --lock-namespace at an existing namespace (such as the operator's own). "+
			"Leader election keeps retrying, and the controller does not start until it succeeds", namespace)
	case apierrors.IsForbidden(err):
		return fmt.Sprintf("Cannot %s the leader-election Lease: the operator's service account lacks permission on "+
			"leases.coordination.k8s.io in namespace %q (it needs get, create and update). "+
			"Leader election keeps retrying, and the controller does not start until it succeeds", verb, namespace)
	default:
		return ""
	}
}
