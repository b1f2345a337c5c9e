package harness

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
)

func TestPercentile(t *testing.T) {
	var s Sample
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(101-i)*time.Millisecond)
	}
	sum := s.Summarize()
	if sum.N != 100 || sum.P50 != 50*time.Millisecond || sum.P99 != 99*time.Millisecond || sum.Max != 100*time.Millisecond {
		t.Errorf("summary of 1..100 ms = %+v", sum)
	}
	one := Sample{7 * time.Second}.Summarize()
	if one.P50 != 7*time.Second || one.P99 != 7*time.Second {
		t.Errorf("summary of one value = %+v", one)
	}
	if (Sample{}).Summarize().N != 0 {
		t.Error("empty sample has values")
	}
}

// historyFixture feeds a History the events of job "j" by hand.
type historyFixture struct {
	h   *History
	obj Objects
}

func (f *historyFixture) pod(name, uid string, phase corev1.PodPhase, draining, deleted bool) Observation {
	return f.h.Observe(time.Now(), f.obj.Worker(name, uid, phase, draining, false), deleted)
}

func (f *historyFixture) hosts(names ...string) {
	f.h.Observe(time.Now(), f.obj.ConfigMap(names...), false)
}

func (f *historyFixture) role(names ...string) { f.h.Observe(time.Now(), f.obj.Role(names...), false) }

func TestHistory(t *testing.T) {
	f := &historyFixture{h: NewHistory(V1), obj: Objects{Job: "j"}}
	j := f.h.AddJob("j")
	f.role("j-worker-0")
	if ob := f.pod("j-worker-0", "u0", corev1.PodPending, false, false); !ob.NewWorker || ob.Job != j {
		t.Fatalf("first event: %+v", ob)
	}
	f.pod("j-worker-0", "u0", corev1.PodRunning, false, false)
	f.hosts("j-worker-0")
	// Created before the Role allowed it.
	f.pod("j-worker-1", "u1", corev1.PodRunning, false, false)
	f.role("j-worker-0", "j-worker-1")
	f.hosts("j-worker-0", "j-worker-1")
	if got := j.RoleAfterPod(); !slices.Equal(got, []string{"j-worker-1"}) {
		t.Errorf("RoleAfterPod = %v", got)
	}
	if j.MaxLive != 2 {
		t.Errorf("MaxLive = %d", j.MaxLive)
	}

	// Drained right, then deleted: no anomaly.
	if ob := f.pod("j-worker-1", "u1", corev1.PodRunning, true, false); !ob.Drained {
		t.Errorf("drain not observed: %+v", ob)
	}
	f.hosts("j-worker-0")
	if ob := f.pod("j-worker-1", "u1", corev1.PodRunning, true, true); !ob.Deleting || j.Workers["j-worker-1"].GoneAt.IsZero() {
		t.Errorf("deletion not observed: %+v", ob)
	}
	// Deleted while listed, through a tombstone.
	f.h.Observe(time.Now(), cache.DeletedFinalStateUnknown{Key: "ns/j-worker-0", Obj: &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "j-worker-0", UID: "u0", Labels: map[string]string{LabelJobName: "j", LabelRole: "worker"}},
	}}, true)
	if !slices.Equal(f.h.DeletedWhileListed, []string{"j-worker-0"}) {
		t.Errorf("DeletedWhileListed = %v", f.h.DeletedWhileListed)
	}
	// A listed name given to a new pod.
	if ob := f.pod("j-worker-0", "u0b", corev1.PodPending, false, false); !ob.NewWorker {
		t.Errorf("the new pod under an old name is no new worker: %+v", ob)
	}
	if !slices.Equal(f.h.ListedNameReused, []string{"j-worker-0"}) || len(j.Replaced) != 1 || len(j.AllWorkers()) != 3 {
		t.Errorf("ListedNameReused = %v, replaced %d, all %d", f.h.ListedNameReused, len(j.Replaced), len(j.AllWorkers()))
	}
	// A ConfigMap version after the drain that lists the drained worker.
	f.hosts("j-worker-1")
	if !slices.Equal(f.h.ListedAfterDrain, []string{"j-worker-1"}) {
		t.Errorf("ListedAfterDrain = %v", f.h.ListedAfterDrain)
	}
	// Other jobs' and other roles' objects are ignored.
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "k-worker-0", Labels: map[string]string{LabelJobName: "k", LabelRole: "worker"}}}
	if ob := f.h.Observe(time.Now(), other, false); ob.Job != nil {
		t.Errorf("a pod of an unknown job was taken: %+v", ob)
	}
}

// The v2beta1 operator's workers are reachable once an EndpointSlice of
// the job's Service names them; listing one earlier is the anomaly.
func TestHistoryV2beta1(t *testing.T) {
	f := &historyFixture{h: NewHistory(V2beta1), obj: Objects{Job: "j", API: V2beta1}}
	j := f.h.AddJob("j")
	if ob := f.pod("j-worker-0", "u0", corev1.PodRunning, false, false); !ob.NewWorker {
		t.Fatalf("a worker with v2beta1 labels was not taken: %+v", ob)
	}
	f.pod("j-worker-1", "u1", corev1.PodRunning, false, false)
	if ob := f.h.Observe(time.Now(), f.obj.Slice("j-a", "j-worker-0"), false); !ob.ReachChanged {
		t.Errorf("slice not observed: %+v", ob)
	}
	// A second slice adds j-worker-1; an endpoint without the pod's name
	// as hostname does not make a name resolve.
	other := f.obj.Slice("j-b", "j-worker-1", "j-worker-2")
	other.Endpoints[1].Hostname = nil
	f.h.Observe(time.Now(), other, false)
	if got := j.Reach[len(j.Reach)-1].Names; len(got) != 2 || !got["j-worker-0"] || !got["j-worker-1"] {
		t.Errorf("reachable = %v", got)
	}
	f.hosts("j-worker-0", "j-worker-1")
	if !j.Workers["j-worker-1"].ListedAt.After(time.Time{}) {
		t.Error("FQDN host lines were not mapped to their pods")
	}
	// Slice j-b goes (the watch's deletion carries a new revision), then
	// j-worker-1 leaves the script; j-worker-2 is listed without any slice
	// naming it.
	f.h.Observe(time.Now(), f.obj.Slice("j-b"), true)
	f.hosts("j-worker-0")
	f.pod("j-worker-2", "u2", corev1.PodRunning, false, false)
	f.hosts("j-worker-0", "j-worker-1", "j-worker-2")
	if got := f.h.Unreachable(j); !slices.Equal(got, []string{"j-worker-2"}) {
		t.Errorf("Unreachable = %v, want [j-worker-2]", got)
	}
	if got := j.RoleAfterPod(); len(got) != 3 {
		t.Errorf("no Role exists for v2beta1: RoleAfterPod = %v", got)
	}
}

func TestAPIJobObject(t *testing.T) {
	u, err := V2beta1.JobObject(NewJob("ns", "j", 3, nil))
	if err != nil {
		t.Fatal(err)
	}
	if u.GetAPIVersion() != "kubeflow.org/v2beta1" || u.GetKind() != "MPIJob" || u.GetName() != "j" {
		t.Errorf("object %s %s %s", u.GetAPIVersion(), u.GetKind(), u.GetName())
	}
	if n, _, _ := unstructured.NestedInt64(u.Object, "spec", "mpiReplicaSpecs", "Worker", "replicas"); n != 3 {
		t.Errorf("worker replicas %d", n)
	}
	if _, found := u.Object["status"]; found {
		t.Error("the object carries a status")
	}
	if a, ok := APIByVersion("v2beta1"); !ok || a.Binary != "_output/bin/mpi-operator-v2" {
		t.Errorf("APIByVersion(v2beta1) = %+v, %v", a, ok)
	}
	if _, ok := APIByVersion("v2"); ok {
		t.Error("an unknown version was accepted")
	}
	if got := V2beta1.ListedPods("#!/bin/sh\necho j-worker-0.j.ns.svc\necho j-worker-1.j.ns.svc\n"); len(got) != 2 || !got["j-worker-1"] {
		t.Errorf("ListedPods = %v", got)
	}
}

func TestScanLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "op.log")
	log := `I0102 03:04:05.000001   42 server.go:1] "Starting"
E0102 03:04:06.500000   42 controller.go:2] "Syncing MPIJob failed; retrying" err="boom"
W0102 03:04:07.000000   42 reflector.go:3] "watch ended"
panic: runtime error: invalid memory address
E0102 03:04:08.000000   42 controller.go:2] "Syncing MPIJob failed; retrying" err=<
	deleting pod a: connection refused
	deleting pod b: connection refused
 > mpijob="ns/j"
I0102 03:04:09.000000   42 server.go:1] "after"
`
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	op := &Operator{LogPath: path, Started: time.Date(2026, 5, 1, 0, 0, 0, 0, time.Local)}
	s := op.ScanLog()
	if s.Errors != 2 || s.Warnings != 1 || s.Panics != 1 || len(s.Lines) != 4 {
		t.Fatalf("summary %+v", s)
	}
	if got, want := s.Lines[3].Msg, `"Syncing MPIJob failed; retrying" err=< deleting pod a: connection refused deleting pod b: connection refused > mpijob="ns/j"`; got != want {
		t.Errorf("multi-line message %q, want %q", got, want)
	}
	if want := time.Date(2026, 1, 2, 3, 4, 6, 500000000, time.Local); !s.Lines[0].At.Equal(want) {
		t.Errorf("time %v, want %v", s.Lines[0].At, want)
	}
	if s.Lines[0].Msg != `"Syncing MPIJob failed; retrying" err="boom"` {
		t.Errorf("message %q", s.Lines[0].Msg)
	}
	if got := s.Samples(6); len(got) != 3 {
		t.Errorf("samples %q", got)
	}
}

func TestTable(t *testing.T) {
	tb := NewTable("a", "b")
	tb.Add("x|y", "1")
	if got, want := tb.String(), "| a | b |\n| --- | --- |\n| x\\|y | 1 |\n"; got != want {
		t.Errorf("table %q, want %q", got, want)
	}
	if got := CountOf([]string{"a", "b"}); got != "2: a, b" {
		t.Errorf("CountOf = %q", got)
	}
}

// Free ports come from below the ephemeral range, are distinct, bind, and
// are not handed out twice while their owner lives, not even before they
// are bound.
func TestFreePorts(t *testing.T) {
	ports, err := FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	more, err := FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range append(ports, more...) {
		if p < portFirst || p > portLast || p >= 32768 || seen[p] {
			t.Errorf("port %d: outside %d-%d, or handed out twice (%v %v)", p, portFirst, portLast, ports, more)
		}
		seen[p] = true
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Errorf("port %d does not bind: %v", p, err)
			continue
		}
		ln.Close()
	}
	dir := filepath.Join(os.TempDir(), "mpi-operator-ports")
	if claimPort(dir, ports[0], os.Getpid()) {
		t.Errorf("port %d was claimed again", ports[0])
	}
	// A port whose owner has exited is free again.
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(ports[1])), []byte("999999999\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	if !claimPort(dir, ports[1], os.Getpid()) {
		t.Errorf("port %d of an exited owner was not claimed", ports[1])
	}
}

func TestClaimPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ClaimPort(port); err == nil {
		t.Errorf("port %d was claimed while something listens on it", port)
	}
	ln.Close()
	if err := ClaimPort(port); err != nil {
		t.Errorf("port %d, free and unclaimed, was not claimed: %v", port, err)
	}
	if err := ClaimPort(port); err == nil {
		t.Errorf("port %d was claimed twice", port)
	}
}

func TestFmtDur(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{1500 * time.Microsecond, "1 ms"},
		{2500 * time.Millisecond, "2.50 s"},
		{150 * time.Second, "150 s"},
		{-2 * time.Second, "-2.00 s"},
		// A difference of times that saturated.
		{time.Duration(math.MinInt64), "-9223372037 s"},
	} {
		if got := FmtDur(tt.d); got != tt.want {
			t.Errorf("FmtDur(%d) = %q, want %q", int64(tt.d), got, tt.want)
		}
	}
}

// A poll ends when its check holds, on the check's error, on Abort's
// reason, or at the timeout; Retry returns the last error.
func TestPoller(t *testing.T) {
	ctx := context.Background()
	p := Poller{Every: time.Millisecond}
	n := 0
	if err := p.Until(ctx, time.Second, func() (bool, error) { n++; return n == 3, nil }); err != nil || n != 3 {
		t.Errorf("Until: %v after %d checks, want nil after 3", err, n)
	}
	boom := errors.New("boom")
	if err := p.Until(ctx, time.Second, func() (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Errorf("Until with a failing check: %v", err)
	}
	if err := p.Until(ctx, 5*time.Millisecond, func() (bool, error) { return false, nil }); !errors.Is(err, ErrTimeout) {
		t.Errorf("Until past the timeout: %v", err)
	}
	aborted := Poller{Abort: func() string { return "gone" }}
	if err := aborted.Until(ctx, time.Second, func() (bool, error) { return true, nil }); err == nil || err.Error() != "gone" {
		t.Errorf("Until with Abort: %v", err)
	}
	if err := p.Retry(ctx, 5*time.Millisecond, func() error { return boom }); !errors.Is(err, boom) {
		t.Errorf("Retry: %v, want boom", err)
	}
	if v, ok := Metric("# HELP x\nx 1\nx_total{a=\"b\"} 2.5\n", `x_total{a="b"}`); !ok || v != 2.5 {
		t.Errorf("Metric: %v %v", v, ok)
	}
}

func TestIsLauncherPod(t *testing.T) {
	for name, want := range map[string]bool{
		"pi-launcher":       true,  // the v1 operator's launcher
		"pi-launcher-x7k2q": true,  // a pod of the v2beta1 operator's launcher Job
		"pi-launcher-0":     false, // not a name the Job controller gives
		"pi-worker-0":       false,
		"pi-launcherx7k2q":  false,
		"launcher":          false,
	} {
		if got := IsLauncherPod(name); got != want {
			t.Errorf("IsLauncherPod(%q) = %v, want %v", name, got, want)
		}
	}
}
