package operator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/kubeflow/mpi-operator/pkg/metrics"
)

// LeaseTimings are the leader-election intervals.
type LeaseTimings struct {
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// DefaultLeaseTimings keep the idle API traffic of leader election low.
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
var DefaultLeaseTimings = LeaseTimings{
	LeaseDuration: 20 * time.Second,
	RenewDeadline: 10 * time.Second,
	RetryPeriod:   5 * time.Second,
}

// LeaderIdentity names this replica in a Lease: the host (the pod name in a
// cluster) plus a random suffix, so that a restarted container never passes
// for its predecessor.
func LeaderIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "mpi-operator"
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails on supported platforms
	return host + "_" + hex.EncodeToString(b)
}

// Elector runs a function only while this replica holds a leader Lease.
type Elector struct {
	// Client reads and writes the Lease.
	Client kubernetes.Interface
	// Namespace and Name locate the Lease. The namespace must exist; the
	// Lease is created when missing.
	Namespace string
	Name      string
	// Identity names this replica in the Lease; empty means LeaderIdentity().
	Identity string
	// Timings are the election's intervals; zero means DefaultLeaseTimings.
	Timings LeaseTimings
	// Lead is what the Lease guards. It runs each time this replica becomes
	// the leader, and must return soon after its context is done.
	Lead func(ctx context.Context) error
	// Exit ends the process; it is called with status 1 when the Lease is
	// lost while the operator is not stopping. Nil means klog's
	// FlushAndExit. Tests set a function that returns.
	Exit func(code int)
}

// ErrLeaseLost is returned by Elector.Run when the Lease was lost and Exit
// returned (only in tests: the default Exit does not return).
var ErrLeaseLost = errors.New("lost the leader lease")

// Run campaigns for the Lease until ctx is done. While leading it runs
// e.Lead. On ctx done it waits for e.Lead to return and only then releases
// the Lease, so a successor never overlaps with it. It returns nil after a
// stop, e.Lead's error when that fails (or returns) while leading, and
// ErrLeaseLost.
func (e *Elector) Run(ctx context.Context) error {
	if e.Client == nil || e.Namespace == "" || e.Name == "" || e.Lead == nil {
		return errors.New("configuring leader election: the elector needs a client, the Lease's namespace and name, and a function to lead")
	}
	identity := e.Identity
	if identity == "" {
		identity = LeaderIdentity()
	}
	timings := e.Timings
	if timings == (LeaseTimings{}) {
		timings = DefaultLeaseTimings
	}
	exit := e.Exit
	if exit == nil {
		exit = func(code int) { klog.FlushAndExit(klog.ExitFlushTimeout, code) }
	}
	lease := klog.KRef(e.Namespace, e.Name)

	lock := &explainingLock{
		Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: e.Namespace, Name: e.Name},
			Client:     e.Client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
		},
		namespace: e.Namespace,
		name:      e.Name,
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
		Name:            e.Name,
		LeaseDuration:   timings.LeaseDuration,
		RenewDeadline:   timings.RenewDeadline,
		RetryPeriod:     timings.RetryPeriod,
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
				klog.InfoS("Became the leader; starting the controller", "lease", lease, "identity", identity)
				runCtx, cancel := context.WithCancel(ctx)
				defer cancel()
				stop := context.AfterFunc(leaseCtx, cancel)
				defer stop()

				err := e.Lead(runCtx)
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
					klog.InfoS("Left leader election", "lease", lease, "identity", identity)
					return
				}
				klog.ErrorS(nil, "Lost the leader lease; exiting so that the restarted operator lists the cluster state afresh",
					"lease", lease, "identity", identity)
				exit(1)
			},
			OnNewLeader: func(leader string) {
				if leader != identity {
					klog.InfoS("Another replica leads; standing by", "leader", leader, "lease", lease)
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

	klog.InfoS("Waiting to become the leader", "lease", lease, "identity", identity)
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
		return ErrLeaseLost
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
	name      string

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
		klog.ErrorS(err, hint, "lease", klog.KRef(l.namespace, l.name))
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
