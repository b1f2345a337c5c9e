package integration

import (
	"context"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kubeflow/mpi-operator/test/harness"
	kubeflow "github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// A history is every version of the pods, ConfigMaps, EndpointSlices and
// MPIJobs of a namespace, watched from the start of a test. The tests read
// from it what polling cannot see: the order of writes. The cluster has a
// single etcd, so every object's resourceVersion is a revision of one
// sequence: sorted by it, the versions of different objects replay the
// namespace as it was after each write. That holds for this test cluster,
// not for clients in general.
type history struct {
	t      *testing.T
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	sources []source

	mu       sync.Mutex
	versions []version
}

// source is a kind of object the history watches, and how to list it.
type source struct {
	kind string
	list func(context.Context, metav1.ListOptions) (runtime.Object, error)
}

// version is one write of an object as a watch delivered it.
type version struct {
	kind    string // Pod, ConfigMap, EndpointSlice or MPIJob
	name    string
	rv      uint64
	seen    time.Time // when the watch delivered it
	deleted bool
	// initial is a version that the list at the start found: the
	// object's latest then, not its first.
	initial bool
	obj     runtime.Object
}

// recordHistory starts watching namespace ns until finish or the end of
// the test.
func recordHistory(t *testing.T, ns string) *history {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &history{t: t, cancel: cancel}
	core := suite.Kube.CoreV1()
	h.watch(ctx, "Pod",
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return core.Pods(ns).List(ctx, o)
		},
		core.Pods(ns).Watch)
	h.watch(ctx, "ConfigMap",
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return core.ConfigMaps(ns).List(ctx, o)
		},
		core.ConfigMaps(ns).Watch)
	slices := suite.Kube.DiscoveryV1().EndpointSlices(ns)
	h.watch(ctx, "EndpointSlice",
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return slices.List(ctx, o) },
		slices.Watch)
	mpijobs := suite.mpi.KubeflowV2beta1().MPIJobs(ns)
	h.watch(ctx, "MPIJob",
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return mpijobs.List(ctx, o) },
		mpijobs.Watch)
	t.Cleanup(h.stop)
	return h
}

// watch records what exists of a kind, then every change from there on.
func (h *history) watch(ctx context.Context, kind string, list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFunc cache.WatchFuncWithContext) {
	h.t.Helper()
	h.sources = append(h.sources, source{kind: kind, list: list})
	listed, err := list(ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatalf("listing %ss: %v", kind, err)
	}
	items, err := meta.ExtractList(listed)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, obj := range items {
		h.add(kind, watch.Added, obj, true)
	}
	listMeta, err := meta.ListAccessor(listed)
	if err != nil {
		h.t.Fatal(err)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, listMeta.GetResourceVersion(),
		&cache.ListWatch{WatchFuncWithContext: watchFunc})
	if err != nil {
		h.t.Fatalf("watching %ss: %v", kind, err)
	}
	h.wg.Go(func() {
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				switch ev.Type {
				case watch.Added, watch.Modified, watch.Deleted:
					h.add(kind, ev.Type, ev.Object, false)
				case watch.Error:
					h.t.Errorf("the watch of %ss failed: %v", kind, ev.Object)
				}
			}
		}
	})
}

func (h *history) add(kind string, t watch.EventType, obj runtime.Object, initial bool) {
	m, err := meta.Accessor(obj)
	if err != nil {
		h.t.Errorf("a %s without metadata: %v", kind, err)
		return
	}
	rv, err := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
	if err != nil {
		h.t.Errorf("%s %s has resourceVersion %q, not a revision", kind, m.GetName(), m.GetResourceVersion())
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.versions = append(h.versions, version{
		kind: kind, name: m.GetName(), rv: rv, seen: time.Now(), deleted: t == watch.Deleted, initial: initial, obj: obj,
	})
}

// stop ends the recording; the history keeps what it has seen.
func (h *history) stop() {
	h.once.Do(func() {
		h.cancel()
		h.wg.Wait()
	})
}

// finish waits until the watches have delivered every write made so far,
// then ends the recording. A test calls it before it reads the history.
func (h *history) finish() {
	h.t.Helper()
	ctx := context.Background()
	for _, src := range h.sources {
		listed, err := src.list(ctx, metav1.ListOptions{})
		if err != nil {
			h.t.Fatalf("listing %ss: %v", src.kind, err)
		}
		items, err := meta.ExtractList(listed)
		if err != nil {
			h.t.Fatal(err)
		}
		listMeta, err := meta.ListAccessor(listed)
		if err != nil {
			h.t.Fatal(err)
		}
		now := revision(h.t, listMeta.GetResourceVersion())
		want := map[string]uint64{}
		for _, obj := range items {
			m, err := meta.Accessor(obj)
			if err != nil {
				h.t.Fatal(err)
			}
			want[m.GetName()] = revision(h.t, m.GetResourceVersion())
		}
		harness.Eventually(h.t, poll, waitTimeout, "the watch of "+src.kind+"s to catch up", func() (bool, error) {
			return h.caughtUp(src.kind, want, now), nil
		})
	}
	h.stop()
}

// caughtUp tells whether the history shows each object of kind that a list
// at revision now found, at its revision or later, and the removal of each
// that the list did not find.
func (h *history) caughtUp(kind string, want map[string]uint64, now uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	latest := map[string]version{}
	for _, v := range h.versions {
		if v.kind == kind && v.rv >= latest[v.name].rv {
			latest[v.name] = v
		}
	}
	for name, rv := range want {
		if v, ok := latest[name]; !ok || v.rv < rv {
			return false
		}
	}
	for name, v := range latest {
		if _, listed := want[name]; !listed && !v.deleted && v.rv <= now {
			return false
		}
	}
	return true
}

// revision parses a resourceVersion that the API server returned.
func revision(t *testing.T, rv string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q is not a revision", rv)
	}
	return n
}

// snapshot is the namespace as the history replays it.
type snapshot struct {
	pods       map[string]*corev1.Pod
	configMaps map[string]*corev1.ConfigMap
	slices     map[string]*discoveryv1.EndpointSlice
	jobs       map[string]*kubeflow.MPIJob
	// running and resolved are the pods, by UID, that have been Running,
	// and whose name has resolved through an EndpointSlice, by now.
	running, resolved map[types.UID]bool
}

// listed is what the job's discover_hosts.sh lists in the snapshot.
func (s *snapshot) listed(job string) []string {
	cm := s.configMaps[job+"-config"]
	if cm == nil {
		return nil
	}
	return scriptWorkers(cm.Data["discover_hosts.sh"])
}

// liveWorkers are the job's worker pods that are not being deleted.
func (s *snapshot) liveWorkers(job string) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range s.pods {
		if p.Labels[labelJobName] == job && p.Labels[labelJobRole] == "worker" && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// apply takes in a version, and returns the object's previous version.
func (s *snapshot) apply(v version) runtime.Object {
	var before runtime.Object
	switch obj := v.obj.(type) {
	case *corev1.Pod:
		if old, ok := s.pods[v.name]; ok {
			before = old
		}
		setOrDelete(s.pods, v, obj)
		if obj.Status.Phase == corev1.PodRunning {
			s.running[obj.UID] = true
		}
	case *corev1.ConfigMap:
		if old, ok := s.configMaps[v.name]; ok {
			before = old
		}
		setOrDelete(s.configMaps, v, obj)
	case *discoveryv1.EndpointSlice:
		setOrDelete(s.slices, v, obj)
		for _, ep := range obj.Endpoints {
			if ep.Hostname != nil && ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" && ep.TargetRef.Name == *ep.Hostname {
				s.resolved[ep.TargetRef.UID] = true
			}
		}
	case *kubeflow.MPIJob:
		if old, ok := s.jobs[v.name]; ok {
			before = old
		}
		setOrDelete(s.jobs, v, obj)
	}
	return before
}

func setOrDelete[T any](m map[string]T, v version, obj T) {
	if v.deleted {
		delete(m, v.name)
	} else {
		m[v.name] = obj
	}
}

// replay hands visit every version in revision order, with the object's
// version before it (nil when it is new) and the namespace right after it.
func (h *history) replay(visit func(v version, before runtime.Object, s *snapshot)) {
	h.mu.Lock()
	versions := slices.Clone(h.versions)
	h.mu.Unlock()
	sort.SliceStable(versions, func(i, j int) bool { return versions[i].rv < versions[j].rv })
	s := &snapshot{
		pods: map[string]*corev1.Pod{}, configMaps: map[string]*corev1.ConfigMap{},
		slices: map[string]*discoveryv1.EndpointSlice{}, jobs: map[string]*kubeflow.MPIJob{},
		running: map[types.UID]bool{}, resolved: map[types.UID]bool{},
	}
	for _, v := range versions {
		before := s.apply(v)
		visit(v, before, s)
	}
}

// deletion is a worker whose deletion began.
type deletion struct {
	pod    *corev1.Pod // as it was before
	rv     uint64      // the revision of the deletionTimestamp (or of the removal, if it came at once)
	seen   time.Time
	listed []string // the workers that discover_hosts.sh listed at rv
}

// workerDeletions returns every deletion of one of the job's workers.
func (h *history) workerDeletions(job string) []deletion {
	var out []deletion
	h.replay(func(v version, before runtime.Object, s *snapshot) {
		pod, ok := v.obj.(*corev1.Pod)
		if !ok || pod.Labels[labelJobName] != job || pod.Labels[labelJobRole] != "worker" {
			return
		}
		prev, _ := before.(*corev1.Pod)
		if prev != nil && prev.UID != pod.UID {
			prev = nil
		}
		if (prev != nil && prev.DeletionTimestamp != nil) || (!v.deleted && pod.DeletionTimestamp == nil) {
			return
		}
		if prev == nil {
			prev = pod
		}
		out = append(out, deletion{pod: prev, rv: v.rv, seen: v.seen, listed: s.listed(job)})
	})
	return out
}

// listing is a worker that a version of discover_hosts.sh lists that the
// version before did not.
type listing struct {
	pod string
	rv  uint64
	// Whether, by then, the pod of that name existed, had been Running and
	// its name had resolved.
	exists, running, resolved bool
}

// newListings returns every listing of one of the job's workers since the
// history started.
func (h *history) newListings(job string) []listing {
	var out []listing
	h.replay(func(v version, before runtime.Object, s *snapshot) {
		if _, ok := v.obj.(*corev1.ConfigMap); !ok || v.deleted || v.initial || v.name != job+"-config" {
			return
		}
		var was []string
		if prev, ok := before.(*corev1.ConfigMap); ok {
			was = scriptWorkers(prev.Data["discover_hosts.sh"])
		}
		for _, name := range s.listed(job) {
			if slices.Contains(was, name) {
				continue
			}
			l := listing{pod: name, rv: v.rv}
			if p := s.pods[name]; p != nil {
				l.exists, l.running, l.resolved = true, s.running[p.UID], s.resolved[p.UID]
			}
			out = append(out, l)
		}
	})
	return out
}

// checkWorkerOrder fails the test for each worker of job that
// discover_hosts.sh lists before it has been Running and its name has
// resolved, and for each that is deleted while listed.
func (h *history) checkWorkerOrder(job string) {
	h.t.Helper()
	for _, l := range h.newListings(job) {
		if !l.exists || !l.running || !l.resolved {
			h.t.Errorf("discover_hosts.sh lists %s at revision %d while it exists=%t, has been Running=%t, resolves=%t",
				l.pod, l.rv, l.exists, l.running, l.resolved)
		}
	}
	for _, d := range h.workerDeletions(job) {
		if slices.Contains(d.listed, d.pod.Name) {
			h.t.Errorf("worker %s was deleted at revision %d while discover_hosts.sh listed it (%v)", d.pod.Name, d.rv, d.listed)
		}
	}
}

// jobVersions returns the versions of the MPIJob in revision order.
func (h *history) jobVersions(name string) []*kubeflow.MPIJob {
	var out []*kubeflow.MPIJob
	h.replay(func(v version, _ runtime.Object, _ *snapshot) {
		if job, ok := v.obj.(*kubeflow.MPIJob); ok && v.name == name && !v.deleted {
			out = append(out, job)
		}
	})
	return out
}

// workersEver returns the names of every worker pod the job has had.
func (h *history) workersEver(job string) []string {
	var out []string
	h.replay(func(v version, _ runtime.Object, _ *snapshot) {
		if pod, ok := v.obj.(*corev1.Pod); ok && pod.Labels[labelJobName] == job && pod.Labels[labelJobRole] == "worker" &&
			!slices.Contains(out, pod.Name) {
			out = append(out, pod.Name)
		}
	})
	slices.Sort(out)
	return out
}

// maxLiveWorkers is the most workers the job had at once that were not
// being deleted.
func (h *history) maxLiveWorkers(job string) int {
	most := 0
	h.replay(func(_ version, _ runtime.Object, s *snapshot) {
		most = max(most, len(s.liveWorkers(job)))
	})
	return most
}
