package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

var testNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// actFixture is an engine on a fake clientset that holds a job's workers;
// log records, in order, every request and every hook the engine calls.
type actFixture struct {
	t      *testing.T
	engine *Engine
	client *fake.Clientset
	job    Job
	pods   []*corev1.Pod
	mu     sync.Mutex // the engine writes in parallel
	log    []string
	events []string
	// filesErr, when set, is what the files' write returns.
	filesErr error
	// afterRead, when set, runs once the workers are read from the pods,
	// before Act: events that the informer delivers meanwhile.
	afterRead func()
}

func newActFixture(t *testing.T, workers int) *actFixture {
	owner := &metav1.ObjectMeta{Name: "j", Namespace: "ns", UID: "job-uid"}
	f := &actFixture{t: t}
	f.job = Job{
		Owner:       reconcile.Owner{Kind: "MPIJob", Object: owner},
		UID:         owner.UID,
		Generation:  2,
		Replicas:    workers,
		Elastic:     true,
		DrainPeriod: 5 * time.Second,
		WorkerName:  func(i int) string { return fmt.Sprintf("j-worker-%d", i) },
		Now:         testNow,
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	var objs []runtime.Object
	for i := range workers {
		p := f.worker(i)
		p.UID = types.UID(p.Name)
		p.Status.Phase = corev1.PodRunning
		f.pods = append(f.pods, p)
		objs = append(objs, p)
		if err := indexer.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	f.client = fake.NewClientset(objs...)
	f.client.PrependReactor("*", "pods", func(a core.Action) (bool, runtime.Object, error) {
		name := ""
		switch a := a.(type) {
		case core.CreateAction:
			name = a.GetObject().(*corev1.Pod).Name
		case core.PatchAction:
			name = a.GetName()
		case core.DeleteAction:
			name = a.GetName()
		}
		f.record(a.GetVerb() + " " + name)
		return false, nil, nil
	})
	writes := reconcile.PodWrites{Client: f.client, Lister: corelisters.NewPodLister(indexer),
		Expectations: reconcile.NewExpectations(testingclock.NewFakePassiveClock(testNow))}
	f.engine = &Engine{Pods: writes, Creations: writes, Clock: testingclock.NewFakePassiveClock(testNow)}
	return f
}

// ensure gets or creates the job's ConfigMap name holding data, through
// reconcile.Ensure as the controllers write their files and objects.
func (f *actFixture) ensure(ctx context.Context, name, data string) error {
	cms := f.client.CoreV1().ConfigMaps("ns")
	ch := reconcile.ChildOf("ConfigMap",
		func(_, name string) (*corev1.ConfigMap, error) {
			return cms.Get(context.Background(), name, metav1.GetOptions{})
		},
		func(string) reconcile.TypedClient[*corev1.ConfigMap] { return cms },
		func(cur, want *corev1.ConfigMap) (*corev1.ConfigMap, bool) {
			if cur.Data["data"] == want.Data["data"] {
				return cur, false
			}
			merged := cur.DeepCopy()
			merged.Data = want.Data
			return merged, true
		})
	want := &corev1.ConfigMap{ObjectMeta: f.worker(0).ObjectMeta, Data: map[string]string{"data": data}}
	want.Name = name
	_, err := reconcile.Ensure(ctx, f.job.Owner, ch, want)
	return err
}

// objectWrites are the creations and updates of ConfigMaps so far.
func (f *actFixture) objectWrites() []string {
	var out []string
	for _, a := range f.client.Actions() {
		if a.GetResource().Resource == "configmaps" && (a.GetVerb() == "create" || a.GetVerb() == "update") {
			out = append(out, a.GetVerb())
		}
	}
	return out
}

func (f *actFixture) record(step string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, step)
}

func (f *actFixture) worker(i int) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: f.job.WorkerName(i), Namespace: "ns",
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(f.job.Owner.Object.(*metav1.ObjectMeta), corev1.SchemeGroupVersion.WithKind("MPIJob"))}}}
}

// act plans for replicas workers and acts on the plan.
func (f *actFixture) act(replicas int) (Outcome, error) {
	f.t.Helper()
	f.job.Replicas = replicas
	// As the controllers do: the expectations first, then the pods.
	f.job.Seen = f.engine.Pods.Expectations.Seen(f.job.Owner.Key())
	spec := elastic.Spec{Elastic: true, Replicas: replicas, DrainPeriod: f.job.DrainPeriod, WorkerName: f.job.WorkerName}
	ws := elastic.ParseWorkers(f.pods, func(p *corev1.Pod) (int, bool) {
		var i int
		_, err := fmt.Sscanf(p.Name, "j-worker-%d", &i)
		return i, err == nil
	})
	if f.afterRead != nil {
		f.afterRead()
	}
	plan := elastic.PlanWorkers(spec, ws, len(f.pods), func(int) elastic.Holder { return elastic.NameFree }, testNow)
	return f.engine.Act(context.Background(), f.job, ws, plan, Hooks{
		Files: func(ctx context.Context, plan elastic.Plan) (string, error) {
			f.record("files")
			if f.filesErr != nil {
				return "", f.filesErr
			}
			script := "#!/bin/sh\n"
			for _, name := range plan.Hosts.Running {
				script += "echo " + name + ":1\n"
			}
			return script, f.ensure(ctx, "j-files", script)
		},
		Beside: []func(context.Context, elastic.Plan, bool) error{func(ctx context.Context, plan elastic.Plan, settled bool) error {
			if !settled {
				return nil
			}
			f.record(fmt.Sprintf("exec %v", plan.Exec))
			return f.ensure(ctx, "j-exec", fmt.Sprint(plan.Exec))
		}},
		Tell: func(context.Context, string) error {
			f.record("tell")
			return nil
		},
		Worker: f.worker,
		Event:  func(eventType, reason, msg string) { f.events = append(f.events, eventType+" "+reason+" "+msg) },
	})
}

func (f *actFixture) expectLog(want ...string) {
	f.t.Helper()
	// The files and the objects beside them are written at once: their
	// order is not the engine's.
	// Nor is the order of the requests of one parallel batch.
	got := slices.Clone(f.log)
	if len(got) >= 2 && got[0] != "files" && got[1] == "files" {
		got[0], got[1] = got[1], got[0]
	}
	verb := func(s string) string { return strings.Fields(s)[0] }
	for i := 0; i < len(got); {
		j := i + 1
		for j < len(got) && verb(got[j]) == verb(got[i]) && verb(got[i]) != "create" {
			j++
		}
		slices.Sort(got[i:j])
		i = j
	}
	if diff := cmp.Diff(want, got); diff != "" {
		f.t.Errorf("the engine's steps (-want +got):\n%s", diff)
	}
}

// TestActOrder: the files and exec rights, then the launcher told, then
// the drain marks of the unlisted victims, the creations and the
// deletions, in that order.
func TestActOrder(t *testing.T) {
	t.Run("scale-in", func(t *testing.T) {
		f := newActFixture(t, 3)
		if _, err := f.act(1); err != nil {
			t.Fatal(err)
		}
		f.expectLog("files", "exec [j-worker-0 j-worker-1 j-worker-2]", "tell", "patch j-worker-1", "patch j-worker-2")
		want := []string{"Normal WorkersDraining Scaling down to 1 worker(s): j-worker-2, j-worker-1 left discover_hosts.sh and will be deleted in 5s"}
		if diff := cmp.Diff(want, f.events); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	})
	t.Run("scale-out", func(t *testing.T) {
		f := newActFixture(t, 1)
		out, err := f.act(3)
		if err != nil {
			t.Fatal(err)
		}
		f.expectLog("files", "exec [j-worker-0 j-worker-1 j-worker-2]", "tell", "create j-worker-1", "create j-worker-2")
		if diff := cmp.Diff([]int{1, 2}, out.Created); diff != "" {
			t.Errorf("created (-want +got):\n%s", diff)
		}
	})
	t.Run("drained victims", func(t *testing.T) {
		f := newActFixture(t, 2)
		f.pods[1].Annotations = map[string]string{elastic.AnnotationDrainingSince: testNow.Add(-time.Minute).Format(time.RFC3339)}
		if _, err := f.act(1); err != nil {
			t.Fatal(err)
		}
		f.expectLog("files", "exec [j-worker-0 j-worker-1]", "tell", "delete j-worker-1")
		if len(f.events) != 0 {
			t.Errorf("events %q: the draining event announced the deletion", f.events)
		}
	})
}

// TestRefusedFilesMarkNothing: a write of the files that fails starts no
// drain and creates nothing.
func TestRefusedFilesMarkNothing(t *testing.T) {
	f := newActFixture(t, 3)
	f.filesErr = errors.New("refused")
	if _, err := f.act(1); err == nil {
		t.Fatal("no error")
	}
	f.expectLog("files", "exec [j-worker-0 j-worker-1 j-worker-2]")
}

// TestActWaitsForOwnPodWrites: while the cache does not show a pod write of
// the controller's, no pod is written, and while it does not show a mark or
// a deletion, the files wait too.
func TestActWaitsForOwnPodWrites(t *testing.T) {
	t.Run("creation unseen", func(t *testing.T) {
		f := newActFixture(t, 1)
		f.engine.Pods.Expectations.ExpectCreate("ns/j", "j-worker-9")
		out, err := f.act(3)
		if err != nil {
			t.Fatal(err)
		}
		f.expectLog("files", "tell")
		if out.Settled || out.Requeue <= 0 {
			t.Errorf("outcome %+v, want unsettled with a requeue", out)
		}
	})
	// The event of the creation arrives after the pods were read: they do
	// not show the worker, so the plan would create it again and leave it
	// out of the Role. What the expectations told before the read holds.
	t.Run("creation seen after the pods were read", func(t *testing.T) {
		f := newActFixture(t, 1)
		f.engine.Pods.Expectations.ExpectCreate("ns/j", "j-worker-1")
		f.afterRead = func() { f.engine.Pods.Expectations.ObserveCreate("ns/j", "j-worker-1") }
		out, err := f.act(2)
		if err != nil {
			t.Fatal(err)
		}
		f.expectLog("files", "tell")
		if out.Settled {
			t.Errorf("outcome %+v, want unsettled", out)
		}
	})
	t.Run("mark seen after the pods were read", func(t *testing.T) {
		f := newActFixture(t, 3)
		f.engine.Pods.Expectations.ExpectChange("ns/j", "j-worker-2", reconcile.ShowsAnnotation(elastic.AnnotationDrainingSince, "x"))
		f.afterRead = func() {
			marked := f.pods[2].DeepCopy()
			marked.Annotations = map[string]string{elastic.AnnotationDrainingSince: "x"}
			f.engine.Pods.Expectations.Observe("ns/j", marked)
		}
		if _, err := f.act(1); err != nil {
			t.Fatal(err)
		}
		f.expectLog()
	})
	t.Run("mark unseen", func(t *testing.T) {
		f := newActFixture(t, 3)
		f.engine.Pods.Expectations.ExpectChange("ns/j", "j-worker-2", reconcile.ShowsAnnotation(elastic.AnnotationDrainingSince, "x"))
		if _, err := f.act(1); err != nil {
			t.Fatal(err)
		}
		f.expectLog()
	})
}

// TestActGivesWay: once the files are written, a job queued urgently
// meanwhile (GiveWay) stops Act at the next step: right after the files,
// or after a batch of creations (their replacement marks still go, so that
// no failed worker is replaced twice) and before the deletions.
func TestActGivesWay(t *testing.T) {
	for _, tc := range []struct {
		name string
		// after is the step of the log after which the job is queued
		// urgently.
		after   string
		want    []string
		created []int
	}{
		{name: "after the files", after: "files",
			want: []string{"files", "exec [j-worker-0 j-worker-2 j-worker-3 j-worker-4]"}},
		{name: "after a creation", after: "create j-worker-3",
			want:    []string{"files", "exec [j-worker-0 j-worker-2 j-worker-3 j-worker-4]", "tell", "create j-worker-3", "patch j-worker-1"},
			created: []int{3}},
		{name: "never", after: "none",
			want: []string{"files", "exec [j-worker-0 j-worker-2 j-worker-3 j-worker-4]", "tell",
				"create j-worker-3", "create j-worker-4", "patch j-worker-1", "delete j-worker-2"},
			created: []int{3, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newActFixture(t, 3)
			f.pods[1].Status.Phase = corev1.PodFailed
			f.pods[2].Annotations = map[string]string{elastic.AnnotationDrainingSince: testNow.Add(-time.Minute).Format(time.RFC3339)}
			f.engine.GiveWay = func(key string) bool {
				if key != "ns/j" {
					t.Errorf("GiveWay asked of %q", key)
				}
				f.mu.Lock()
				defer f.mu.Unlock()
				return slices.Contains(f.log, tc.after)
			}
			out, err := f.act(3)
			if err != nil {
				t.Fatal(err)
			}
			f.expectLog(tc.want...)
			if out.GaveWay != (tc.after != "none") {
				t.Errorf("GaveWay %v", out.GaveWay)
			}
			if diff := cmp.Diff(tc.created, out.Created, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("created (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCreationsPerSyncAreBounded: one sync creates at most
// MaxCreatesPerSync workers and announces the whole step once.
func TestCreationsPerSyncAreBounded(t *testing.T) {
	f := newActFixture(t, 0)
	out, err := f.act(MaxCreatesPerSync + 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Created) != MaxCreatesPerSync {
		t.Errorf("created %d workers, want %d", len(out.Created), MaxCreatesPerSync)
	}
	if len(f.events) != 1 || !cmp.Equal(f.events[0][:len("Normal WorkersScalingUp Scaling up to 37")], "Normal WorkersScalingUp Scaling up to 37") {
		t.Errorf("events %q, want one WorkersScalingUp for the step", f.events)
	}
}

// TestFailedWorkerIsReplaced: a failed worker of an elastic job names the
// worker created in its place, once it exists, and the user is told.
func TestFailedWorkerIsReplaced(t *testing.T) {
	f := newActFixture(t, 2)
	f.pods[1].Status.Phase = corev1.PodFailed
	f.pods[1].Status.Reason = "Evicted"
	if _, err := f.act(2); err != nil {
		t.Fatal(err)
	}
	f.expectLog("files", "exec [j-worker-0 j-worker-2]", "tell", "create j-worker-2", "patch j-worker-1")
	want := "Warning WorkerReplaced Worker j-worker-1 ended (Evicted) and is out of discover_hosts.sh; replaced by j-worker-2"
	if len(f.events) != 2 || f.events[1] != want {
		t.Errorf("events %q, want the step's and %q", f.events, want)
	}
}

// TestAtBound: a plan whose creations MaxPods held back blocks its job with
// a message that says how many workers it has, may have and waits for.
func TestAtBound(t *testing.T) {
	if err := AtBound("ns/pi", elastic.Plan{Create: []int{1}}, 5000); err != nil {
		t.Errorf("a plan that holds nothing back: %v", err)
	}
	err := AtBound("ns/pi", elastic.Plan{HeldBack: 2, Pods: 5000}, 5000)
	reason, blocked := reconcile.BlockedReason(err)
	if !blocked || reason != reconcile.ReasonAtBound {
		t.Fatalf("BlockedReason(%v) = %q, %v; want %q", err, reason, blocked, reconcile.ReasonAtBound)
	}
	want := "MPIJob ns/pi has 5000 workers that are listed or draining, the most it may have at once (5000): 2 more are created as draining workers go"
	if err.Error() != want {
		t.Errorf("message %q, want %q", err.Error(), want)
	}
}
