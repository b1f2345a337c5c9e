package main

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/test/harness"
)

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"--short", "--jobs", "7", "--root", t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if o.jobs != 7 || o.ops != 40 || o.kills != 5 || o.apiRestarts != 1 {
		t.Errorf("--short --jobs 7: jobs %d, ops %d, kills %d, restarts %d", o.jobs, o.ops, o.kills, o.apiRestarts)
	}
	o, err = parseFlags([]string{"--seed", "9", "--root", t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if o.jobs != 20 || o.ops != 200 || o.kills != 20 || o.apiRestarts != 2 || o.seed != 9 {
		t.Errorf("defaults: %+v", o)
	}
	if _, err := parseFlags([]string{"--min-workers", "3", "--max-workers", "3"}); err == nil {
		t.Error("min == max accepted")
	}
}

func TestExplain(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.Local)
	restarts := []harness.APIServerRestart{{Stopping: t0, Ready: t0.Add(5 * time.Second)}}
	line := func(at time.Duration, msg string) harness.LogLine {
		return harness.LogLine{Severity: "E", At: t0.Add(at), Msg: msg}
	}
	refused := `"Error retrieving lease lock" err="dial tcp 127.0.0.1:28443: connect: connection refused"`
	if got := explain(line(3*time.Second, refused), restarts); got != "API server restart 1" {
		t.Errorf("refused during the restart: %q", got)
	}
	forbidden := `"Failed to update lease optimistically, falling back to slow path" err="leases.coordination.k8s.io \"mpi-operator\" is forbidden: User \"system:serviceaccount:mpi-operator:mpi-operator\" cannot update resource \"leases\""`
	if got := explain(line(4*time.Second, forbidden), restarts); got != "API server restart 1" {
		t.Errorf("a 403 right after the restart: %q", got)
	}
	if got := explain(line(time.Hour, forbidden), restarts); got != "" {
		t.Errorf("a 403 an hour later explained by %q", got)
	}
	if got := explain(line(20*time.Second, refused), restarts); got == "" {
		t.Error("refused in the grace after ready is not explained")
	}
	if got := explain(line(time.Minute, refused), restarts); got != "" {
		t.Errorf("refused long after the restart explained by %q", got)
	}
	lease := `"Error initially creating lease lock" err="leases.coordination.k8s.io \"mpi-operator\" already exists"`
	if got := explain(line(time.Hour, lease), restarts); got != twoReplicas {
		t.Errorf("the Lease creation race: %q", got)
	}
	if got := explain(line(2*time.Second, `"Syncing MPIJob failed; retrying" err="pods \"x\" already exists"`), restarts); got != "" {
		t.Errorf("a sync error explained by %q", got)
	}
}

func TestClassifyLogs(t *testing.T) {
	t0 := time.Now()
	restarts := []harness.APIServerRestart{{Stopping: t0, Ready: t0.Add(time.Second)}}
	src := logSource{name: "r", log: harness.LogSummary{Lines: []harness.LogLine{
		{Severity: "E", At: t0, Msg: "Failed to watch err=EOF 1"},
		{Severity: "E", At: t0, Msg: "Failed to watch err=EOF 2"},
		{Severity: "E", At: t0.Add(time.Hour), Msg: "boom"},
		{Severity: "W", At: t0, Msg: "a warning"},
		{Severity: "E", At: t0, Msg: "stopping", AfterStop: true},
		{Severity: "panic", Msg: "panic: oops"},
	}}}
	rep := classifyLogs([]logSource{src}, restarts)
	if rep.errors != 3 || rep.unexplained != 1 || len(rep.panics) != 1 || len(rep.groups) != 2 {
		t.Errorf("report %+v", rep)
	}
	if rep.groups[0].count != 2 || rep.groups[0].explained == "" {
		t.Errorf("first group %+v", rep.groups[0])
	}
}

func TestRetriable(t *testing.T) {
	gr := schema.GroupResource{Group: "kubeflow.org", Resource: "mpijobs"}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{apierrors.NewConflict(gr, "j", errors.New("modified")), true},
		{apierrors.NewServiceUnavailable("restarting"), true},
		{errors.New("dial tcp: connection refused"), true},
		{apierrors.NewNotFound(gr, "j"), false},
		{apierrors.NewForbidden(gr, "j", errors.New("no")), false},
		{apierrors.NewInvalid(schema.GroupKind{Group: "kubeflow.org", Kind: "MPIJob"}, "j", nil), false},
	} {
		if got := retriable(c.err); got != c.want {
			t.Errorf("retriable(%v) = %v", c.err, got)
		}
	}
}

// fixture builds a snapshot of job "a" (desired 2) and its children.
type fixture struct {
	s   *snapshot
	obj harness.Objects
}

func newFixture() *fixture {
	job := newJob("a", 2, 1, 6, 0)
	job.UID = "uid-a"
	return &fixture{obj: harness.Objects{Job: "a"}, s: &snapshot{
		jobs:  []kubeflow.MPIJob{*job},
		cms:   map[string]*corev1.ConfigMap{},
		roles: map[string]*rbacv1.Role{},
	}}
}

func (f *fixture) pod(name, role string, phase corev1.PodPhase, owner types.UID, mutate ...func(*corev1.Pod)) {
	p := f.obj.Worker(name, "", phase, false, false)
	p.Labels[harness.LabelRole] = role
	if owner != "" {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: kubeflow.Kind, Name: "a", UID: owner, Controller: new(true)}}
	}
	for _, m := range mutate {
		m(p)
	}
	f.s.pods = append(f.s.pods, *p)
}

func (f *fixture) children(hosts, exec []string, active int32) {
	f.s.cms["a-config"] = f.obj.ConfigMap(hosts...)
	f.s.roles["a-launcher"] = f.obj.Role(exec...)
	f.s.jobs[0].Status.ReplicaStatuses = map[common.ReplicaType]*common.ReplicaStatus{
		kubeflow.MPIReplicaTypeWorker: {Active: active},
	}
}

func TestSettledJob(t *testing.T) {
	f := newFixture()
	f.pod("a-launcher", "launcher", corev1.PodRunning, "uid-a")
	f.pod("a-worker-0", "worker", corev1.PodRunning, "uid-a")
	f.pod("a-worker-3", "worker", corev1.PodRunning, "uid-a")
	f.children([]string{"a-worker-0", "a-worker-3"}, []string{"a-worker-0", "a-worker-3"}, 2)
	js := f.s.states()["a"]
	if why := js.unsettled(2); why != "" {
		t.Errorf("settled job: %s", why)
	}
	if why := js.unsettled(3); !strings.Contains(why, "the harness set 3") {
		t.Errorf("want mismatch: %s", why)
	}
	if d := duplicates(js); len(d) != 0 {
		t.Errorf("duplicates %v", d)
	}
	if o := orphans(f.s); len(o) != 0 {
		t.Errorf("orphans %v", o)
	}
}

func TestBrokenJob(t *testing.T) {
	f := newFixture()
	f.pod("a-launcher", "launcher", corev1.PodRunning, "uid-a")
	f.pod("a-worker-0", "worker", corev1.PodRunning, "uid-a")
	f.pod("a-worker-1", "worker", corev1.PodPending, "uid-a", func(p *corev1.Pod) { p.Labels[harness.LabelReplicaIndex] = "0" })
	f.pod("a-worker-2", "worker", corev1.PodRunning, "uid-a", func(p *corev1.Pod) {
		p.Annotations = map[string]string{harness.AnnotationDrainingSince: "2026-01-01T00:00:00Z"}
	})
	f.pod("a-worker-7", "worker", corev1.PodRunning, "uid-old")
	f.pod("stray", "worker", corev1.PodRunning, "")
	f.children([]string{"a-worker-0", "a-worker-2"}, []string{"a-worker-0", "a-worker-1", "a-worker-2", "a-worker-9"}, 3)
	js := f.s.states()["a"]
	why := js.unsettled(2)
	for _, want := range []string{"4 live workers (3 Running) for 2 wanted", "1 draining", "discover_hosts.sh lists", "the Role allows", "status counts 3"} {
		if !strings.Contains(why, want) {
			t.Errorf("unsettled %q lacks %q", why, want)
		}
	}
	d := duplicates(js)
	if len(d) != 2 || !strings.Contains(d[0], "index 0 held by a-worker-0, a-worker-1") || !strings.Contains(d[1], "5 worker pods for 2 wanted") {
		t.Errorf("duplicates %q", d)
	}
	o := orphans(f.s)
	if len(o) != 2 || !strings.HasPrefix(o[0], "a-worker-7 ") || !strings.HasPrefix(o[1], "stray ") {
		t.Errorf("orphans %q", o)
	}
}

func TestReviewNames(t *testing.T) {
	got := reviewNames("a", "b", []string{"a-worker-0", "a-worker-4"}, map[string]bool{"a-worker-5": true})
	want := []string{"a-launcher", "a-worker-0", "a-worker-4", "a-worker-5", "a-worker-6", "a-worker-7", "a-worker-999", "b-worker-0"}
	if !slices.Equal(got, want) {
		t.Errorf("reviewNames = %v, want %v", got, want)
	}
}

func TestUnexplainedExits(t *testing.T) {
	t0 := time.Now()
	res := &result{
		restarts: []harness.APIServerRestart{{Stopping: t0, Ready: t0.Add(5 * time.Second)}},
		exits: []exitRec{
			{at: t0.Add(12 * time.Second), slot: 0, what: "lost the lease"},
			{at: t0.Add(10 * time.Minute), slot: 1, what: "exited by itself"},
		},
	}
	if got := res.unexplainedExits(); len(got) != 1 || !strings.Contains(got[0], "replica 1") {
		t.Errorf("unexplained exits %q", got)
	}
}

func TestRecorder(t *testing.T) {
	tl, err := newTimeline(t.TempDir() + "/timeline.log")
	if err != nil {
		t.Fatal(err)
	}
	defer tl.close()
	rec := newRecorder(tl)
	rec.addJob("j")
	obj := harness.Objects{Job: "j"}
	rec.observe(obj.Role("j-worker-0"), false)
	rec.observe(obj.Worker("j-worker-0", "u", corev1.PodRunning, false, false), false)
	rec.observe(obj.ConfigMap("j-worker-0"), false)
	rec.observe(obj.Worker("j-worker-0", "u", corev1.PodRunning, false, true), false)
	rec.observe(obj.Worker("j-worker-0", "u", corev1.PodRunning, false, true), true)
	rec.with(func(h *harness.History) {
		if !slices.Equal(h.DeletedWhileListed, []string{"j-worker-0"}) {
			t.Errorf("DeletedWhileListed = %v", h.DeletedWhileListed)
		}
	})
	if rec.changes != 5 {
		t.Errorf("%d changes", rec.changes)
	}
}
