package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// opRun is one process of one of the two operator replicas.
type opRun struct {
	slot, n  int // replica (0 or 1) and its n-th process
	op       *harness.Operator
	identity string // its leader-election identity, from its log
	ended    time.Time
	end      string // how it ended: "SIGKILL", "stopped", or its exit
}

func (r *opRun) String() string {
	return fmt.Sprintf("replica %d run %d (pid %d)", r.slot, r.n, r.op.PID)
}

// exitRec is a process that ended without the harness killing or stopping
// it, or that failed to start.
type exitRec struct {
	at   time.Time
	slot int
	what string
}

// holderChange is a new holder of the leader Lease, as the harness polled it.
type holderChange struct {
	seen     time.Time
	acquired time.Time // the Lease's acquireTime, written by the new holder
	holder   string
}

// fleet runs the two replicas, restarts a replica whose process exits by
// itself (as a Deployment would) and one the harness killed when told to,
// and follows the leader Lease.
type fleet struct {
	o  *options
	cl *harness.Cluster
	tl *timeline

	mu      sync.Mutex
	current [2]*opRun
	runs    []*opRun
	// failedLogs are the logs of the processes that failed to start.
	failedLogs []string
	exits      []exitRec
	holders    []holderChange
	restart    [2]chan struct{}

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startFleet(ctx context.Context, o *options, cl *harness.Cluster, tl *timeline) *fleet {
	f := &fleet{o: o, cl: cl, tl: tl}
	ctx, f.cancel = context.WithCancel(ctx)
	for slot := range f.restart {
		f.restart[slot] = make(chan struct{}, 1)
		f.wg.Add(1)
		go f.supervise(ctx, slot)
	}
	f.wg.Add(1)
	go f.pollLease(ctx)
	return f
}

var identityRe = regexp.MustCompile(`"Waiting to become the leader".* identity="([^"]+)"`)

// readIdentity finds the replica's leader-election identity in its log.
func readIdentity(ctx context.Context, path string) string {
	var id string
	_ = harness.Poller{}.Until(ctx, 30*time.Second, func() (bool, error) {
		if b, err := os.ReadFile(path); err == nil {
			if m := identityRe.FindSubmatch(b); m != nil {
				id = string(m[1])
			}
		}
		return id != "", nil
	})
	return id
}

// supervise keeps one replica running until ctx ends.
func (f *fleet) supervise(ctx context.Context, slot int) {
	defer f.wg.Done()
	for n := 1; ctx.Err() == nil; n++ {
		logPath := filepath.Join(f.o.localDir, fmt.Sprintf("operator-%d-%02d.log", slot, n))
		op, err := harness.StartOperator(ctx, harness.OperatorConfig{
			Bin: f.o.operatorBin, Kubeconfig: f.cl.OperatorKubeconfig, LogPath: logPath,
			Port: operatorPorts[slot], Logf: func(string, ...any) {},
		})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			f.mu.Lock()
			f.failedLogs = append(f.failedLogs, logPath)
			f.mu.Unlock()
			f.recordExit(slot, fmt.Sprintf("run %d failed to start: %v", n, firstLine(err.Error())))
			_ = sleepCtx(ctx, 2*time.Second)
			continue
		}
		r := &opRun{slot: slot, n: n, op: op, identity: readIdentity(ctx, logPath)}
		f.mu.Lock()
		f.current[slot] = r
		f.runs = append(f.runs, r)
		f.mu.Unlock()
		f.tl.printf("fleet: %s started, identity %s, log %s", r, r.identity, filepath.Base(logPath))
		select {
		case <-op.Done():
		case <-ctx.Done():
			return
		}
		f.mu.Lock()
		killed := op.Killed()
		if !killed {
			r.ended = time.Now()
			r.end = fmt.Sprintf("exited by itself: %v", op.ExitErr())
		}
		f.mu.Unlock()
		if killed {
			select {
			case <-f.restart[slot]:
			case <-ctx.Done():
				return
			}
			continue
		}
		f.recordExit(slot, fmt.Sprintf("%s %s; log tail: %s", r, r.end, lastLine(harness.Tail(logPath, 1))))
		_ = sleepCtx(ctx, time.Second)
	}
}

func (f *fleet) recordExit(slot int, what string) {
	f.mu.Lock()
	f.exits = append(f.exits, exitRec{at: time.Now(), slot: slot, what: what})
	f.mu.Unlock()
	f.tl.printf("fleet: replica %d: %s", slot, what)
	logf("operator replica %d: %s", slot, what)
}

// pollLease follows the holder of the leader Lease.
func (f *fleet) pollLease(ctx context.Context) {
	defer f.wg.Done()
	last := ""
	for ctx.Err() == nil {
		lease, err := f.cl.Kube.CoordinationV1().Leases(harness.OperatorNamespace).Get(ctx, harness.LeaseName, metav1.GetOptions{})
		if err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != last {
			last = *lease.Spec.HolderIdentity
			hc := holderChange{seen: time.Now(), holder: last}
			if lease.Spec.AcquireTime != nil {
				hc.acquired = lease.Spec.AcquireTime.Time
			}
			f.mu.Lock()
			f.holders = append(f.holders, hc)
			f.mu.Unlock()
			f.tl.printf("lease: held by %s (acquired %s)", last, hc.acquired.Format("15:04:05.000"))
		}
		_ = sleepCtx(ctx, 200*time.Millisecond)
	}
}

// leader returns the live run that holds the Lease, if any.
func (f *fleet) leader() *opRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.holders) == 0 {
		return nil
	}
	holder := f.holders[len(f.holders)-1].holder
	for _, r := range f.current {
		if r != nil && r.identity == holder && r.op.Alive() {
			return r
		}
	}
	return nil
}

// both tells whether both replicas run, with known identities.
func (f *fleet) both() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.current {
		if r == nil || r.identity == "" || !r.op.Alive() {
			return false
		}
	}
	return true
}

// waitFor polls cond every 100 ms until it holds, ctx ends, or timeout
// passes (harness.ErrTimeout).
func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) error {
	return harness.Poller{}.Until(ctx, timeout, func() (bool, error) { return cond(), nil })
}

// kill SIGKILLs a run; false when it had exited already.
func (f *fleet) kill(r *opRun) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !r.op.Kill() {
		return false
	}
	r.ended, r.end = time.Now(), "SIGKILL"
	return true
}

// takeover waits until the Lease names the other replica's run, and
// returns it with the time its holding began (the Lease's acquireTime, or
// when the harness saw it).
func (f *fleet) takeover(ctx context.Context, killed *opRun, timeout time.Duration) (*opRun, time.Time, error) {
	var by *opRun
	var at time.Time
	err := waitFor(ctx, timeout, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		other := f.current[1-killed.slot]
		if other == nil || len(f.holders) == 0 {
			return false
		}
		hc := f.holders[len(f.holders)-1]
		if hc.holder != other.identity || !hc.seen.After(killed.ended) {
			return false
		}
		by, at = other, hc.acquired
		if at.IsZero() {
			at = hc.seen
		}
		return true
	})
	return by, at, err
}

// restartSlot lets the supervisor start a killed replica again.
func (f *fleet) restartSlot(slot int) {
	select {
	case f.restart[slot] <- struct{}{}:
	default:
	}
}

// stop ends the supervisors and stops both replicas with SIGTERM.
func (f *fleet) stop() {
	f.cancel()
	f.wg.Wait()
	f.mu.Lock()
	cur := f.current
	f.mu.Unlock()
	for _, r := range cur {
		if r != nil && r.op.Alive() {
			r.op.Stop()
			f.mu.Lock()
			r.ended, r.end = time.Now(), "stopped"
			f.mu.Unlock()
		}
	}
}

// sleepCtx sleeps d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func firstLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}

func lastLine(s string) string {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			return s[i+1:]
		}
	}
	return s
}

// logs are the operator logs of every process, started or not.
func (f *fleet) logs() []logSource {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []logSource
	for _, r := range f.runs {
		out = append(out, logSource{name: r.String(), log: r.op.ScanLog()})
	}
	for _, p := range f.failedLogs {
		out = append(out, logSource{name: filepath.Base(p) + " (failed start)", log: harness.ScanLogFile(p, time.Now().Year())})
	}
	return out
}
