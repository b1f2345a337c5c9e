package operator

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	"k8s.io/utils/ptr"
)

// waitFor bounds every wait of these tests; the happy paths take
// milliseconds.
const waitFor = 15 * time.Second

// testLease is the Lease the tests elect with.
const (
	testLeaseNamespace = "mpi-operator"
	testLeaseName      = "mpi-operator"
)

// isLeaderGauge reads mpi_operator_is_leader the way Prometheus would.
func isLeaderGauge(t *testing.T) string {
	t.Helper()
	rec := httptest.NewRecorder()
	NewMonitoringHandler(&RunningController{}, false).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "mpi_operator_is_leader "); ok {
			return v
		}
	}
	t.Fatal("mpi_operator_is_leader is not exported")
	return ""
}

func testElector(t *testing.T, kube *kubefake.Clientset, lead func(context.Context) error) *Elector {
	return &Elector{
		Client:    kube,
		Namespace: testLeaseNamespace,
		Name:      testLeaseName,
		Identity:  "replica-a",
		Timings:   LeaseTimings{LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond},
		Lead:      lead,
		Exit:      func(code int) { t.Errorf("exit(%d) called", code) },
	}
}

func leaseHolderOf(t *testing.T, kube *kubefake.Clientset, namespace, name string) string {
	t.Helper()
	l, err := kube.CoordinationV1().Leases(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the Lease: %v", err)
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

func leaseHolder(t *testing.T, kube *kubefake.Clientset) string {
	t.Helper()
	return leaseHolderOf(t, kube, testLeaseNamespace, testLeaseName)
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

// stopLeading cancels a run that leads (an Elector's or Serve's), which
// must then return nil and release the Lease namespace/name.
func stopLeading(t *testing.T, cancel context.CancelFunc, done <-chan error, kube *kubefake.Clientset, namespace, name string) {
	t.Helper()
	cancel()
	if err := waitErr(t, done, "the run to return"); err != nil {
		t.Fatalf("the run returned %v after a stop, want nil", err)
	}
	if h := leaseHolderOf(t, kube, namespace, name); h != "" {
		t.Errorf("Lease holder = %q after the stop, want it released", h)
	}
}

func TestElectorLeadsAndReleasesAfterTheControllerStops(t *testing.T) {
	kube := kubefake.NewClientset()
	started := make(chan struct{})
	var holderAtStop atomic.Value
	e := testElector(t, kube, func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		l, err := kube.CoordinationV1().Leases(testLeaseNamespace).Get(context.Background(), testLeaseName, metav1.GetOptions{})
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
		ObjectMeta: metav1.ObjectMeta{Namespace: testLeaseNamespace, Name: testLeaseName},
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

func TestElectorReportsAnEarlyReturn(t *testing.T) {
	kube := kubefake.NewClientset()
	e := testElector(t, kube, func(context.Context) error { return nil })
	done := make(chan error, 1)
	go func() { done <- e.Run(context.Background()) }()
	if err := waitErr(t, done, "Run to return"); err == nil || !strings.Contains(err.Error(), "stopped unexpectedly") {
		t.Fatalf("Run() = %v, want the controller's early return reported", err)
	}
	if h := leaseHolder(t, kube); h != "" {
		t.Errorf("Lease holder = %q after the controller returned, want it released", h)
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
	e.Exit = func(code int) { exitCode <- code }
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
	if err := waitErr(t, done, "Run to return"); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Run() = %v, want %v", err, ErrLeaseLost)
	}
}

// TestElectorDefaults leaves the identity and the timings unset: the Lease
// named by the elector is taken under a LeaderIdentity.
func TestElectorDefaults(t *testing.T) {
	kube := kubefake.NewClientset()
	started := make(chan struct{})
	e := &Elector{
		Client:    kube,
		Namespace: "kubeflow",
		Name:      "mpi-operator-v2",
		Lead: func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			return nil
		},
		Exit: func(code int) { t.Errorf("exit(%d) called", code) },
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()

	waitClosed(t, started, "the controller to start")
	l, err := kube.CoordinationV1().Leases("kubeflow").Get(context.Background(), "mpi-operator-v2", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the Lease: %v", err)
	}
	host, _ := os.Hostname()
	if h := ptr.Deref(l.Spec.HolderIdentity, ""); host != "" && !strings.HasPrefix(h, host+"_") {
		t.Errorf("Lease holder = %q, want a LeaderIdentity of host %q", h, host)
	}
	if d := ptr.Deref(l.Spec.LeaseDurationSeconds, 0); time.Duration(d)*time.Second != DefaultLeaseTimings.LeaseDuration {
		t.Errorf("Lease duration = %ds, want the default %v", d, DefaultLeaseTimings.LeaseDuration)
	}
	stopLeading(t, cancel, done, kube, "kubeflow", "mpi-operator-v2")
}

func TestElectorNeedsALease(t *testing.T) {
	lead := func(context.Context) error { return nil }
	for name, e := range map[string]*Elector{
		"no client":    {Namespace: "kubeflow", Name: "mpi-operator", Lead: lead},
		"no namespace": {Client: kubefake.NewClientset(), Name: "mpi-operator", Lead: lead},
		"no name":      {Client: kubefake.NewClientset(), Namespace: "kubeflow", Lead: lead},
		"no function":  {Client: kubefake.NewClientset(), Namespace: "kubeflow", Name: "mpi-operator"},
	} {
		if err := e.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "configuring leader election") {
			t.Errorf("%s: Run() = %v, want a configuration error", name, err)
		}
	}
}

func TestLeaseErrorHint(t *testing.T) {
	leases := schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	missingNS := apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "mpi-operator")
	forbidden := apierrors.NewForbidden(leases, testLeaseName, errors.New("no RBAC"))

	if h := leaseErrorHint("create", "mpi-operator", missingNS); !strings.Contains(h, `lock namespace "mpi-operator" does not exist`) ||
		!strings.Contains(h, "--lock-namespace") || !strings.Contains(h, "keeps retrying") {
		t.Errorf("hint for a missing namespace = %q", h)
	}
	if h := leaseErrorHint("get", "kubeflow", forbidden); !strings.Contains(h, "lacks permission") || !strings.Contains(h, `"kubeflow"`) {
		t.Errorf("hint for a forbidden request = %q", h)
	}
	if h := leaseErrorHint("update", "kubeflow", apierrors.NewConflict(leases, testLeaseName, errors.New("changed"))); h != "" {
		t.Errorf("hint for a conflict = %q, want none", h)
	}
}

// lockedBuffer is a buffer that klog may write while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *lockedBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

// captureKlog sends klog's output to a buffer until the test ends.
func captureKlog(t *testing.T) *lockedBuffer {
	t.Helper()
	out := &lockedBuffer{}
	klog.SetLogger(textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(out))))
	t.Cleanup(klog.ClearLogger)
	return out
}

// TestExplainingLock fails the Lease requests the way a setup mistake
// does: the hint names the Lease, and comes once a minute at most.
func TestExplainingLock(t *testing.T) {
	leases := schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	kube := kubefake.NewClientset()
	var getErr atomic.Value
	getErr.Store(apierrors.NewForbidden(leases, "mpi-operator-v2", errors.New("no RBAC")))
	kube.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, getErr.Load().(error)
	})
	kube.PrependReactor("create", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "kubeflow")
	})
	newLock := func() *explainingLock {
		return &explainingLock{
			Interface: &resourcelock.LeaseLock{
				LeaseMeta:  metav1.ObjectMeta{Namespace: "kubeflow", Name: "mpi-operator-v2"},
				Client:     kube.CoordinationV1(),
				LockConfig: resourcelock.ResourceLockConfig{Identity: "replica-a"},
			},
			namespace: "kubeflow",
			name:      "mpi-operator-v2",
		}
	}
	ctx := context.Background()
	out := captureKlog(t)

	l := newLock()
	for range 3 {
		if _, _, err := l.Get(ctx); err == nil {
			t.Fatal("Get() succeeded, want the forbidden error")
		}
	}
	if n := strings.Count(out.String(), "lacks permission"); n != 1 {
		t.Errorf("three forbidden requests gave %d hints, want 1:\n%s", n, out)
	}
	if !strings.Contains(out.String(), `lease="kubeflow/mpi-operator-v2"`) {
		t.Errorf("the hint does not name the Lease:\n%s", out)
	}

	out.Reset()
	l = newLock()
	getErr.Store(apierrors.NewNotFound(leases, "mpi-operator-v2"))
	if _, _, err := l.Get(ctx); !apierrors.IsNotFound(err) {
		t.Fatalf("Get() = %v, want NotFound", err)
	}
	if out.String() != "" {
		t.Errorf("a missing Lease, which gets created, gave a hint:\n%s", out)
	}
	if err := l.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "replica-a"}); err == nil {
		t.Fatal("Create() succeeded, want the missing namespace")
	}
	if !strings.Contains(out.String(), `lock namespace \"kubeflow\" does not exist`) {
		t.Errorf("a missing lock namespace gave no hint:\n%s", out)
	}
}

func TestLeaderIdentity(t *testing.T) {
	a, b := LeaderIdentity(), LeaderIdentity()
	if a == b {
		t.Errorf("two identities are equal: %q", a)
	}
	host, _ := os.Hostname()
	if host != "" && !strings.HasPrefix(a, host+"_") {
		t.Errorf("identity %q does not start with the host name %q", a, host)
	}
}

func TestDefaultLeaseTimings(t *testing.T) {
	lt := DefaultLeaseTimings
	// A leader gives up at most RetryPeriod+RenewDeadline after its last
	// renewal; that must come before a standby may take over.
	if lt.RetryPeriod+lt.RenewDeadline >= lt.LeaseDuration {
		t.Errorf("a leader may still run when a standby takes over: %+v", lt)
	}
	if perMinute := time.Minute / lt.RetryPeriod; perMinute > 15 {
		t.Errorf("the leader writes the Lease %d times a minute", perMinute)
	}
}
