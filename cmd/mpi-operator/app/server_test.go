package app

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	mpifake "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned/fake"
)

// waitFor bounds every wait of these tests; the happy paths take
// milliseconds.
const waitFor = 15 * time.Second

func fakeDiscovery(lists ...*metav1.APIResourceList) *fakediscovery.FakeDiscovery {
	d := kubefake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery)
	d.Resources = lists
	return d
}

func resourceList(groupVersion string, names ...string) *metav1.APIResourceList {
	l := &metav1.APIResourceList{GroupVersion: groupVersion}
	for _, n := range names {
		l.APIResources = append(l.APIResources, metav1.APIResource{Name: n})
	}
	return l
}

func TestCheckMPIJobCRD(t *testing.T) {
	installHint := []string{
		"MPIJob CRD is not installed",
		"kubectl apply -f manifests/base/crd.yaml",
		"kubectl apply -k manifests/overlays/standalone",
	}
	cases := []struct {
		name  string
		lists []*metav1.APIResourceList
		fail  error // returned by every discovery request
		want  []string
	}{
		{
			name:  "installed",
			lists: []*metav1.APIResourceList{resourceList("kubeflow.org/v1", "mpijobs", "mpijobs/status", "mpijobs/scale")},
		},
		{
			name:  "group not served",
			lists: []*metav1.APIResourceList{resourceList("batch/v1", "jobs")},
			want:  installHint,
		},
		{
			name:  "no resources at all",
			lists: nil,
			want:  installHint,
		},
		{
			name:  "group served without mpijobs",
			lists: []*metav1.APIResourceList{resourceList("kubeflow.org/v1", "tfjobs", "tfjobs/status", "pytorchjobs")},
			want:  installHint,
		},
		{
			name:  "only another version of the group",
			lists: []*metav1.APIResourceList{resourceList("kubeflow.org/v2beta1", "mpijobs", "mpijobs/status")},
			want:  installHint,
		},
		{
			name:  "no status subresource",
			lists: []*metav1.APIResourceList{resourceList("kubeflow.org/v1", "mpijobs")},
			want:  []string{"no status subresource", "kubectl apply -f manifests/base/crd.yaml"},
		},
		{
			name: "API server unreachable",
			fail: errors.New("dial tcp 10.0.0.1:443: connect: connection refused"),
			want: []string{"checking whether the MPIJob CRD is installed", "connection refused"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := fakeDiscovery(tc.lists...)
			if tc.fail != nil {
				d.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, tc.fail
				})
			}
			err := checkMPIJobCRD(d)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("checkMPIJobCRD() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("checkMPIJobCRD() = nil, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("checkMPIJobCRD() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestCheckPodGroupCRD(t *testing.T) {
	mpi := resourceList("kubeflow.org/v1", "mpijobs", "mpijobs/status")
	if err := checkPodGroupCRD(fakeDiscovery(mpi, resourceList("scheduling.volcano.sh/v1beta1", "podgroups", "podgroups/status", "queues")), "volcano"); err != nil {
		t.Errorf("with volcano installed: %v", err)
	}
	for name, lists := range map[string][]*metav1.APIResourceList{
		"group missing":              {mpi},
		"group served, no podgroups": {mpi, resourceList("scheduling.volcano.sh/v1beta1", "queues")},
	} {
		err := checkPodGroupCRD(fakeDiscovery(lists...), "volcano")
		if err == nil {
			t.Errorf("%s: checkPodGroupCRD() = nil, want an error", name)
			continue
		}
		for _, w := range []string{"--gang-scheduling=volcano", "podgroups", "scheduling.volcano.sh/v1beta1", "Install volcano"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: checkPodGroupCRD() = %q, want it to contain %q", name, err, w)
			}
		}
	}
}

// TestRunFailsWithoutCRD runs the whole start-up against an API server that
// serves no MPIJobs.
func TestRunFailsWithoutCRD(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NotFound(w, r)
	}))
	defer api.Close()
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBEFLOW_NAMESPACE", "")
	opts, err := ParseArgs([]string{"--master=" + api.URL, "--monitoring-port=0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	err = Run(ctx, opts)
	if err == nil || !strings.Contains(err.Error(), "MPIJob CRD is not installed") {
		t.Fatalf("Run() = %v, want the CRD error", err)
	}
}

func TestBuildRestConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, server string) string {
		p := filepath.Join(dir, name)
		cfg := `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: ` + server + `
users:
- name: u
  user:
    token: secret
contexts:
- name: ctx
  context:
    cluster: c
    user: u
current-context: ctx
`
		if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := write("first", "https://first.example:6443")
	second := write("second", "https://second.example:6443")

	cases := []struct {
		name, kubeconfig, master, wantHost string
	}{
		{name: "kubeconfig", kubeconfig: first, wantHost: "https://first.example:6443"},
		{name: "master overrides the kubeconfig", kubeconfig: first, master: "https://master.example", wantHost: "https://master.example"},
		{name: "a list of kubeconfigs, the first wins", kubeconfig: first + string(filepath.ListSeparator) + second, wantHost: "https://first.example:6443"},
		{name: "master only", master: "http://127.0.0.1:8080", wantHost: "http://127.0.0.1:8080"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			o.KubeConfig, o.MasterURL = tc.kubeconfig, tc.master
			o.QPS, o.Burst = 7.5, 33
			cfg, err := buildRestConfig(o)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.wantHost {
				t.Errorf("Host = %q, want %q", cfg.Host, tc.wantHost)
			}
			if cfg.QPS != 7.5 || cfg.Burst != 33 {
				t.Errorf("QPS, Burst = %v, %v; want 7.5, 33", cfg.QPS, cfg.Burst)
			}
			if cfg.UserAgent != "mpi-operator" {
				t.Errorf("UserAgent = %q, want mpi-operator", cfg.UserAgent)
			}
		})
	}

	o := NewOptions()
	o.KubeConfig = filepath.Join(dir, "missing")
	if _, err := buildRestConfig(o); err == nil {
		t.Error("a missing kubeconfig was accepted")
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

func TestMonitoringServer(t *testing.T) {
	m, err := startMonitoring("127.0.0.1:0", newMonitoringHandler(&runningController{}))
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + m.Addr()

	if code, body := get(t, base+"/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz = %d %q, want 200 \"ok\"", code, body)
	}
	code, body := get(t, base+"/metrics")
	if code != http.StatusOK {
		t.Errorf("/metrics = %d, want 200", code)
	}
	for _, name := range []string{"mpi_operator_is_leader", "mpi_operator_jobs_created_total", "go_goroutines"} {
		if !strings.Contains(body, name) {
			t.Errorf("/metrics does not contain %s", name)
		}
	}
	if code, _ := get(t, base+"/nothing-here"); code != http.StatusNotFound {
		t.Errorf("/nothing-here = %d, want 404", code)
	}

	m.Stop()
	if resp, err := http.Get(base + "/healthz"); err == nil {
		_ = resp.Body.Close()
		t.Error("the server still answers after Stop")
	}
}

// fakeChecker is a controller whose health the test sets.
type fakeChecker struct{ err error }

func (f fakeChecker) Healthy() error { return f.err }

func TestHealthz(t *testing.T) {
	stuck := fakeChecker{errors.New("a sync of an MPIJob has been running for 3m1s (limit 3m0s)")}
	cases := []struct {
		name     string
		running  func(r *runningController)
		wantCode int
		wantBody string
	}{
		{name: "no controller running", running: func(*runningController) {}, wantCode: http.StatusOK, wantBody: "ok"},
		{name: "healthy controller", running: func(r *runningController) { r.set(fakeChecker{}) }, wantCode: http.StatusOK, wantBody: "ok"},
		{
			name:     "stuck controller",
			running:  func(r *runningController) { r.set(stuck) },
			wantCode: http.StatusInternalServerError,
			wantBody: "a sync of an MPIJob has been running for 3m1s (limit 3m0s)",
		},
		{
			name:     "stuck controller gone",
			running:  func(r *runningController) { r.set(stuck); r.clear() },
			wantCode: http.StatusOK,
			wantBody: "ok",
		},
		{
			name:     "a new controller replaces a stuck one",
			running:  func(r *runningController) { r.set(stuck); r.set(fakeChecker{}) },
			wantCode: http.StatusOK,
			wantBody: "ok",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &runningController{}
			tc.running(r)
			rec := httptest.NewRecorder()
			newMonitoringHandler(r).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
			if rec.Code != tc.wantCode || rec.Body.String() != tc.wantBody {
				t.Errorf("/healthz = %d %q, want %d %q", rec.Code, rec.Body.String(), tc.wantCode, tc.wantBody)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "text/plain; charset=utf-8" {
				t.Errorf("Content-Type = %q, want text/plain", ct)
			}
		})
	}
}

// TestRunControllerPublishesItsHealth runs the controller on fake clients:
// /healthz asks it while it runs, and nothing once it has returned.
func TestRunControllerPublishesItsHealth(t *testing.T) {
	t.Setenv("KUBEFLOW_NAMESPACE", "")
	cs := clients{kube: kubefake.NewClientset(), events: kubefake.NewClientset(), mpi: mpifake.NewSimpleClientset(),
		meta: metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())}
	running := &runningController{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- runController(ctx, cs, NewOptions(), running) }()

	deadline := time.Now().Add(waitFor)
	for running.current.Load() == nil {
		if time.Now().After(deadline) {
			t.Fatal("runController did not publish its controller")
		}
		time.Sleep(time.Millisecond)
	}
	if err := running.healthy(); err != nil {
		t.Errorf("healthy() of a running controller = %v, want nil", err)
	}
	cancel()
	if err := waitErr(t, done, "runController to return"); err != nil {
		t.Errorf("runController() = %v after a stop, want nil", err)
	}
	if running.current.Load() != nil {
		t.Error("the stopped controller is still published")
	}
}

func TestMonitoringPortInUse(t *testing.T) {
	m, err := startMonitoring("127.0.0.1:0", http.NotFoundHandler())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	if m2, err := startMonitoring(m.Addr(), http.NotFoundHandler()); err == nil {
		m2.Stop()
		t.Fatal("a second server started on a port in use")
	}
}

// isLeaderGauge reads mpi_operator_is_leader the way Prometheus would.
func isLeaderGauge(t *testing.T) string {
	t.Helper()
	rec := httptest.NewRecorder()
	newMonitoringHandler(&runningController{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "mpi_operator_is_leader "); ok {
			return v
		}
	}
	t.Fatal("mpi_operator_is_leader is not exported")
	return ""
}

func testElector(t *testing.T, kube *kubefake.Clientset, run func(context.Context) error) *elector {
	return &elector{
		coordination: kube,
		namespace:    "mpi-operator",
		name:         leaseName,
		identity:     "replica-a",
		timings:      leaseTimings{LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond},
		run:          run,
		exit:         func(code int) { t.Errorf("exit(%d) called", code) },
	}
}

func leaseHolder(t *testing.T, kube *kubefake.Clientset) string {
	t.Helper()
	l, err := kube.CoordinationV1().Leases("mpi-operator").Get(context.Background(), leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the Lease: %v", err)
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitFor):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func waitErr(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(waitFor):
		t.Fatalf("timed out waiting for %s", what)
		return nil
	}
}

func TestElectorLeadsAndReleasesAfterTheControllerStops(t *testing.T) {
	kube := kubefake.NewClientset()
	started := make(chan struct{})
	var holderAtStop atomic.Value
	e := testElector(t, kube, func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		l, err := kube.CoordinationV1().Leases("mpi-operator").Get(context.Background(), leaseName, metav1.GetOptions{})
		if err != nil {
			holderAtStop.Store("error: " + err.Error())
		} else {
			holderAtStop.Store(ptr.Deref(l.Spec.HolderIdentity, ""))
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()

	waitClosed(t, started, "the controller to start")
	if h := leaseHolder(t, kube); h != "replica-a" {
		t.Errorf("Lease holder = %q, want replica-a", h)
	}
	if v := isLeaderGauge(t); v != "1" {
		t.Errorf("mpi_operator_is_leader = %s while leading, want 1", v)
	}

	cancel()
	if err := waitErr(t, done, "Run to return"); err != nil {
		t.Fatalf("Run() = %v after a stop, want nil", err)
	}
	if h, _ := holderAtStop.Load().(string); h != "replica-a" {
		t.Errorf("the Lease was held by %q when the controller stopped; it must be released only afterwards", h)
	}
	if h := leaseHolder(t, kube); h != "" {
		t.Errorf("Lease holder = %q after the stop, want it released", h)
	}
	if v := isLeaderGauge(t); v != "0" {
		t.Errorf("mpi_operator_is_leader = %s after the stop, want 0", v)
	}
}

func TestElectorStandsByWhileAnotherLeads(t *testing.T) {
	kube := kubefake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mpi-operator", Name: leaseName},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("replica-b"),
			LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime:          &metav1.MicroTime{Time: time.Now()},
			RenewTime:            &metav1.MicroTime{Time: time.Now()},
		},
	})
	var ran atomic.Bool
	e := testElector(t, kube, func(ctx context.Context) error {
		ran.Store(true)
		<-ctx.Done()
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := e.Run(ctx); err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if ran.Load() {
		t.Error("the controller ran while another replica held the Lease")
	}
	if h := leaseHolder(t, kube); h != "replica-b" {
		t.Errorf("Lease holder = %q, want replica-b untouched", h)
	}
}

func TestElectorReturnsTheControllerError(t *testing.T) {
	kube := kubefake.NewClientset()
	boom := errors.New("caches never synced")
	e := testElector(t, kube, func(context.Context) error { return boom })
	done := make(chan error, 1)
	go func() { done <- e.Run(context.Background()) }()
	if err := waitErr(t, done, "Run to return"); !errors.Is(err, boom) {
		t.Fatalf("Run() = %v, want %v", err, boom)
	}
	if h := leaseHolder(t, kube); h != "" {
		t.Errorf("Lease holder = %q after the controller failed, want it released", h)
	}
}

func TestElectorExitsWhenTheLeaseIsLost(t *testing.T) {
	kube := kubefake.NewClientset()
	started, stopped := make(chan struct{}), make(chan struct{})
	e := testElector(t, kube, func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		close(stopped)
		return nil
	})
	// The fake's reactor chain may not change while it is in use, so the
	// failing reactor is there from the start and switched on later.
	var apiDown atomic.Bool
	kube.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if apiDown.Load() {
			return true, nil, errors.New("etcdserver: request timed out")
		}
		return false, nil, nil
	})
	exitCode := make(chan int, 1)
	e.exit = func(code int) { exitCode <- code }
	done := make(chan error, 1)
	go func() { done <- e.Run(context.Background()) }()

	waitClosed(t, started, "the controller to start")
	apiDown.Store(true)

	select {
	case code := <-exitCode:
		if code == 0 {
			t.Errorf("exit(%d) after losing the Lease, want a non-zero status", code)
		}
	case <-time.After(waitFor):
		t.Fatal("the elector did not exit after losing the Lease")
	}
	waitClosed(t, stopped, "the controller to stop")
	if err := waitErr(t, done, "Run to return"); !errors.Is(err, errLeaseLost) {
		t.Errorf("Run() = %v, want %v", err, errLeaseLost)
	}
}

func TestLeaseErrorHint(t *testing.T) {
	leases := schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	missingNS := apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "mpi-operator")
	forbidden := apierrors.NewForbidden(leases, leaseName, errors.New("no RBAC"))

	if h := leaseErrorHint("create", "mpi-operator", missingNS); !strings.Contains(h, `lock namespace "mpi-operator" does not exist`) ||
		!strings.Contains(h, "--lock-namespace") || !strings.Contains(h, "keeps retrying") {
		t.Errorf("hint for a missing namespace = %q", h)
	}
	if h := leaseErrorHint("get", "kubeflow", forbidden); !strings.Contains(h, "lacks permission") || !strings.Contains(h, `"kubeflow"`) {
		t.Errorf("hint for a forbidden request = %q", h)
	}
	if h := leaseErrorHint("update", "kubeflow", apierrors.NewConflict(leases, leaseName, errors.New("changed"))); h != "" {
		t.Errorf("hint for a conflict = %q, want none", h)
	}
}

func TestLeaderIdentity(t *testing.T) {
	a, b := leaderIdentity(), leaderIdentity()
	if a == b {
		t.Errorf("two identities are equal: %q", a)
	}
	host, _ := os.Hostname()
	if host != "" && !strings.HasPrefix(a, host+"_") {
		t.Errorf("identity %q does not start with the host name %q", a, host)
	}
}

func TestDefaultLeaseTimings(t *testing.T) {
	lt := defaultLeaseTimings
	// A leader gives up at most RetryPeriod+RenewDeadline after its last
	// renewal; that must come before a standby may take over.
	if lt.RetryPeriod+lt.RenewDeadline >= lt.LeaseDuration {
		t.Errorf("a leader may still run when a standby takes over: %+v", lt)
	}
	if perMinute := time.Minute / lt.RetryPeriod; perMinute > 15 {
		t.Errorf("the leader writes the Lease %d times a minute", perMinute)
	}
}
