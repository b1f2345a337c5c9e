package main

import (
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeflow/mpi-operator/test/harness"
)

func TestParseProcStatus(t *testing.T) {
	m, err := parseProcStatus("Name:\tx\nVmPeak:\t  900 kB\nVmHWM:\t   2048 kB\nVmRSS:\t   1024 kB\n")
	if err != nil || m.HWM != 2<<20 || m.RSS != 1<<20 {
		t.Errorf("got %+v, %v", m, err)
	}
	if _, err := parseProcStatus("Name:\tx\n"); err == nil {
		t.Error("no error without VmHWM")
	}
}

func TestHistogram(t *testing.T) {
	text := `# HELP x y
x_bucket{le="0.1"} 50
x_bucket{le="1"} 99
x_bucket{le="+Inf"} 100
x_sum 12
x_count 100
`
	h, ok := parseHistogram(text, "x")
	if !ok || h.count != 100 {
		t.Fatalf("parsed %+v, %v", h, ok)
	}
	if q := h.quantileBound(0.5); q != 0.1 {
		t.Errorf("p50 bound %v", q)
	}
	if q := h.quantileBound(0.99); q != 1 {
		t.Errorf("p99 bound %v", q)
	}
}

func TestCountRequests(t *testing.T) {
	lines := []string{
		`{"stage":"ResponseComplete","verb":"update","user":{"username":"u"},"objectRef":{"resource":"leases","namespace":"mpi-operator","name":"mpi-operator"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-01-01T00:00:01.000000Z"}`,
		`{"stage":"ResponseComplete","verb":"patch","user":{"username":"u"},"objectRef":{"resource":"pods","namespace":"n"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-01-01T00:00:02.000000Z"}`,
		`{"stage":"ResponseComplete","verb":"update","user":{"username":"u"},"objectRef":{"resource":"mpijobs","subresource":"status"},"responseStatus":{"code":409},"requestReceivedTimestamp":"2026-01-01T00:00:03.000000Z"}`,
		`{"stage":"ResponseComplete","verb":"watch","user":{"username":"u"},"objectRef":{"resource":"pods"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-01-01T00:00:04.000000Z"}`,
		`{"stage":"ResponseComplete","verb":"create","user":{"username":"other"},"objectRef":{"resource":"pods"},"responseStatus":{"code":201},"requestReceivedTimestamp":"2026-01-01T00:00:05.000000Z"}`,
		`{"stage":"ResponseComplete","verb":"patch","user":{"username":"u"},"objectRef":{"resource":"pods"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-01-01T00:00:09.000000Z"}`,
	}
	path := t.TempDir() + "/audit.log"
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n{\"cut"), 0o644); err != nil {
		t.Fatal(err)
	}
	events, err := readAudit(path, "u")
	if err != nil || len(events) != 5 {
		t.Fatalf("read %d events, %v", len(events), err)
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := countRequests(events, base, base.Add(5*time.Second))
	if c.leaseWrites != 1 || total(c.writes) != 2 || c.writes["patch pods"] != 1 || c.writes["update mpijobs/status"] != 1 ||
		c.reads["watch pods"] != 1 || c.failed["update mpijobs/status 409"] != 1 {
		t.Errorf("counted %+v", c)
	}
	if got := breakdown(c.writes); got != "2 (1 patch pods, 1 update mpijobs/status)" {
		t.Errorf("breakdown %q", got)
	}
}

// recorderFixture feeds a recorder the events of one job by hand.
type recorderFixture struct {
	rec *recorder
	obj harness.Objects
}

func (f *recorderFixture) pod(name string, phase corev1.PodPhase, draining, deleting, deleted bool) {
	p := f.obj.Worker(name, "", phase, draining, deleting)
	if h := f.rec.handlers("pod"); deleted {
		h.DeleteFunc(p)
	} else {
		h.UpdateFunc(nil, p)
	}
}

func (f *recorderFixture) hosts(names ...string) {
	f.rec.handlers("configmap").UpdateFunc(nil, f.obj.ConfigMap(names...))
}

func (f *recorderFixture) role(names ...string) {
	f.rec.handlers("role").UpdateFunc(nil, f.obj.Role(names...))
}

func (f *recorderFixture) resize(to int) *resizeRec {
	f.rec.mu.Lock()
	defer f.rec.mu.Unlock()
	j := f.rec.jobs["j"]
	rz := &resizeRec{job: j, at: time.Now(), from: len(j.LiveWorkers()), to: to}
	j.cur, j.desired = rz, to
	return rz
}

func TestRecorder(t *testing.T) {
	f := &recorderFixture{rec: newRecorder(harness.V1), obj: harness.Objects{Job: "j"}}
	f.rec.addJob("j", 2)
	f.role("j-worker-0", "j-worker-1")
	f.pod("j-worker-0", corev1.PodPending, false, false, false)
	f.pod("j-worker-1", corev1.PodPending, false, false, false)
	f.pod("j-worker-0", corev1.PodRunning, false, false, false)
	f.pod("j-worker-1", corev1.PodRunning, false, false, false)
	f.hosts("j-worker-0", "j-worker-1")
	if j := f.rec.jobs["j"]; j.listedAt.IsZero() || !j.idle() {
		t.Fatal("the job is not settled after its two workers were listed")
	}

	// Growth: Role first, then the pod.
	grow := f.resize(3)
	f.role("j-worker-0", "j-worker-1", "j-worker-2")
	f.pod("j-worker-2", corev1.PodPending, false, false, false)
	if grow.reachAt.IsZero() || grow.podsAt.IsZero() || !grow.settledAt.IsZero() {
		t.Fatalf("growth after Role and pod: %+v", grow)
	}
	f.pod("j-worker-2", corev1.PodRunning, false, false, false)
	f.hosts("j-worker-0", "j-worker-1", "j-worker-2")
	if grow.settledAt.IsZero() {
		t.Fatal("growth did not settle")
	}

	// Shrink done right: drain mark, ConfigMap, then delete.
	shrink := f.resize(2)
	f.pod("j-worker-2", corev1.PodRunning, true, false, false)
	f.hosts("j-worker-0", "j-worker-1")
	if shrink.goneAt.IsZero() || len(shrink.victims) != 1 {
		t.Fatalf("shrink: %+v", shrink)
	}
	f.pod("j-worker-2", corev1.PodRunning, true, true, false)
	f.pod("j-worker-2", corev1.PodRunning, true, true, true)
	if shrink.settledAt.IsZero() {
		t.Fatal("shrink did not settle")
	}

	// Shrink done wrong: deleted while listed, with a pod the Role never
	// allowed.
	f.resize(1)
	f.pod("j-worker-1", corev1.PodRunning, false, true, false)
	f.pod("j-worker-9", corev1.PodPending, false, false, false)
	a := f.rec.anomalies()
	if len(a.deletedWhileListed) != 1 || a.deletedWhileListed[0] != "j-worker-1" {
		t.Errorf("deleted while listed: %v", a.deletedWhileListed)
	}
	if len(a.unexpectedPods) != 1 {
		t.Errorf("unexpected pods: %v", a.unexpectedPods)
	}
	f.hosts("j-worker-0", "j-worker-1")
	// The listing did not change, so it is no new ConfigMap version.
	if len(f.rec.hist.ListedAfterDrain) != 0 {
		t.Errorf("listed after drain: %v", f.rec.hist.ListedAfterDrain)
	}
	f.hosts("j-worker-1")
	if len(f.rec.hist.ListedAfterDrain) != 1 {
		t.Errorf("listed after drain: %v", f.rec.hist.ListedAfterDrain)
	}
}

// A v2beta1 growth is reachable once the job Service's EndpointSlices name
// every new worker, and settles only then.
func TestRecorderV2beta1(t *testing.T) {
	f := &recorderFixture{rec: newRecorder(harness.V2beta1), obj: harness.Objects{Job: "j", API: harness.V2beta1}}
	slice := func(names ...string) {
		f.rec.handlers("endpointslice").UpdateFunc(nil, f.obj.Slice("j-abcde", names...))
	}
	f.rec.addJob("j", 1)
	f.pod("j-worker-0", corev1.PodRunning, false, false, false)
	slice("j-worker-0")
	f.hosts("j-worker-0")
	if j := f.rec.jobs["j"]; !j.idle() {
		t.Fatal("the job is not settled after its worker was listed")
	}
	grow := f.resize(2)
	f.pod("j-worker-1", corev1.PodRunning, false, false, false)
	if !grow.reachAt.IsZero() {
		t.Fatal("reachable before any EndpointSlice named the new worker")
	}
	slice("j-worker-0", "j-worker-1")
	f.hosts("j-worker-0", "j-worker-1")
	if grow.reachAt.IsZero() || grow.settledAt.IsZero() {
		t.Fatalf("growth did not settle: %+v", grow)
	}
	j := f.rec.jobs["j"]
	if got := f.rec.hist.Unreachable(j.JobHistory); len(got) != 0 {
		t.Errorf("unreachable %v", got)
	}
	if resolve, listed := j.resolveTimes(); len(resolve) != 2 || len(listed) != 2 {
		t.Errorf("resolve times %v, listed after resolving %v", resolve, listed)
	}
}
