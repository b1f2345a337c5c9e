package main

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPercentile(t *testing.T) {
	var s sample
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(101-i)*time.Millisecond)
	}
	sum := s.summarize()
	if sum.N != 100 || sum.P50 != 50*time.Millisecond || sum.P99 != 99*time.Millisecond || sum.Max != 100*time.Millisecond {
		t.Errorf("summary of 1..100 ms = %+v", sum)
	}
	one := sample{7 * time.Second}.summarize()
	if one.P50 != 7*time.Second || one.P99 != 7*time.Second {
		t.Errorf("summary of one value = %+v", one)
	}
	if (sample{}).summarize().N != 0 {
		t.Error("empty sample has values")
	}
}

func TestParseDiscoverHosts(t *testing.T) {
	got := parseDiscoverHosts("#!/bin/sh\necho j-launcher:1\necho j-worker-10:2\necho j-worker-2:2\n")
	if len(got) != 3 || !got["j-worker-10"] || !got["j-worker-2"] || !got["j-launcher"] {
		t.Errorf("hosts = %v", got)
	}
	if len(parseDiscoverHosts("#!/bin/sh\n")) != 0 {
		t.Error("an empty script lists hosts")
	}
}

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
	rv  int64
}

func (f *recorderFixture) nextRV() string {
	f.rv++
	return strconv.FormatInt(f.rv, 10)
}

func (f *recorderFixture) pod(name string, phase corev1.PodPhase, draining, deleting, deleted bool) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: f.nextRV(),
		Labels: map[string]string{labelJobName: "j", labelRole: "worker"}}}
	p.Status.Phase = phase
	if draining {
		p.Annotations = map[string]string{annotationDrainingSince: "2026-01-01T00:00:00Z"}
	}
	if deleting {
		p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	}
	h := f.rec.handlers("pod")
	if deleted {
		h.DeleteFunc(p)
	} else {
		h.UpdateFunc(nil, p)
	}
}

func (f *recorderFixture) hosts(names ...string) {
	script := "#!/bin/sh\n"
	for _, n := range names {
		script += "echo " + n + ":1\n"
	}
	f.rec.handlers("configmap").UpdateFunc(nil, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "j-config", ResourceVersion: f.nextRV()},
		Data:       map[string]string{discoverHostsKey: script},
	})
}

func (f *recorderFixture) role(names ...string) {
	f.rec.handlers("role").UpdateFunc(nil, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "j-launcher", ResourceVersion: f.nextRV()},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"create"}, ResourceNames: names},
		},
	})
}

func (f *recorderFixture) resize(to int) *resizeRec {
	f.rec.mu.Lock()
	defer f.rec.mu.Unlock()
	j := f.rec.jobs["j"]
	rz := &resizeRec{job: j, at: time.Now(), from: len(j.livePods()), to: to}
	j.cur, j.desired = rz, to
	return rz
}

func TestRecorder(t *testing.T) {
	f := &recorderFixture{rec: newRecorder()}
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
	if grow.roleAt.IsZero() || grow.podsAt.IsZero() || !grow.settledAt.IsZero() {
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
	a := f.rec.anomalies
	if len(a.deletedWhileListed) != 1 || a.deletedWhileListed[0] != "j-worker-1" {
		t.Errorf("deleted while listed: %v", a.deletedWhileListed)
	}
	if len(a.unexpectedPods) != 1 {
		t.Errorf("unexpected pods: %v", a.unexpectedPods)
	}
	f.hosts("j-worker-0", "j-worker-1")
	// The listing did not change, so it is no new ConfigMap version.
	if len(f.rec.listedAfterDrain) != 0 {
		t.Errorf("listed after drain: %v", f.rec.listedAfterDrain)
	}
	f.hosts("j-worker-1")
	if len(f.rec.listedAfterDrain) != 1 {
		t.Errorf("listed after drain: %v", f.rec.listedAfterDrain)
	}
}
