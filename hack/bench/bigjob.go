package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"

	"github.com/kubeflow/mpi-operator/test/harness"
)

const (
	bigJobNamespace = "mpi-bench-big"
	bigJobName      = "big"
	// bigDefaultWorkers and bigDefaultStep size the big job by default: as
	// many workers as a job may have (MaxWorkers, since its ConfigMap must
	// list them all), at most 5,000, shrunk by 1,000 and grown back.
	bigDefaultStep    = 1000
	bigDefaultWorkers = min(5000, int(kubeflow.MaxWorkers))
	// stepTail is how long after a step settled its CPU time and syncs
	// are read, so that the writes that follow the settling (the status)
	// count in the step.
	stepTail = 2 * time.Second
)

// bigMaxReplicas is the big job's elasticPolicy.maxReplicas: the workers
// it is created with, which the growth returns to.
func (o *options) bigMaxReplicas() int { return o.bigWorkers }

// objWrites are the versions of one object that the bench's watch saw in a
// step, and their sizes (JSON, as the watch delivered them).
type objWrites struct {
	versions   int
	bytes      int64 // all versions together
	last, most int64 // the last version, the largest
}

func (w *objWrites) add(size int) {
	w.versions++
	w.bytes += int64(size)
	w.last = int64(size)
	w.most = max(w.most, int64(size))
}

func (w objWrites) String() string {
	if w.versions == 0 {
		return "0"
	}
	return fmt.Sprintf("%d, %s in all (last %s, largest %s)", w.versions, fmtBytes(w.bytes), fmtBytes(w.last), fmtBytes(w.most))
}

// bigStep is one step of the big job: its creation, a growth or a shrink.
type bigStep struct {
	name     string
	from, to int
	start    time.Time
	// settledAt: when the job had exactly `to` workers, all Running and
	// listed, and no other worker pod (zero if never).
	settledAt time.Time
	// cpu and syncs: the operator's CPU time and syncs from the start to
	// stepTail after the settling (or the timeout).
	cpu     time.Duration
	cpuOK   bool
	syncs   float64
	syncsOK bool
	// The writes the watch saw from the start until the next step.
	configMap, role, status objWrites
}

// changed is the number of workers the step adds or removes.
func (s *bigStep) changed() int { return max(s.to-s.from, s.from-s.to) }

// perWorker divides by the workers changed; 0 when none changed.
func (s *bigStep) perWorker(v float64) float64 {
	if s.changed() == 0 {
		return 0
	}
	return v / float64(s.changed())
}

// cpuPerSync is the step's CPU time per sync, or false without syncs.
func (s *bigStep) cpuPerSync() (time.Duration, bool) {
	if !s.cpuOK || !s.syncsOK || s.syncs <= 0 {
		return 0, false
	}
	return time.Duration(float64(s.cpu) / s.syncs), true
}

// bigResult is what the bigjob scenario measured.
type bigResult struct {
	workers, step, maxReplicas int
	steps                      []*bigStep
	// unsettled names the steps that did not settle within --big-timeout.
	unsettled []string
	mem       procMemory
	log       harness.LogSummary
}

// step returns the step of that name, or nil.
func (b *bigResult) stepNamed(name string) *bigStep {
	if b == nil {
		return nil
	}
	for _, s := range b.steps {
		if s.name == name {
			return s
		}
	}
	return nil
}

// bigWatch follows the big job's workers, discover_hosts.sh, Role and
// status, and tells when the current step has settled.
type bigWatch struct {
	mu  sync.Mutex
	api harness.API
	// pods are the job's worker pods that exist; good[name] when the pod
	// is Running and neither draining nor being deleted.
	pods      map[string]bool
	good      int
	hosts     map[string]bool
	cur       *bigStep
	target    int
	lastRV    map[string]string // by "configmap", "role", "status"
	lastState string            // the last status, as JSON
	changed   chan struct{}
}

func newBigWatch(api harness.API) *bigWatch {
	return &bigWatch{api: api, pods: map[string]bool{}, hosts: map[string]bool{}, lastRV: map[string]string{}, changed: make(chan struct{}, 1)}
}

// begin makes s the step that the writes count in, with target workers.
func (w *bigWatch) begin(s *bigStep) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cur, w.target = s, s.to
	w.check()
}

// check stamps the current step settled when it is; w.mu held.
func (w *bigWatch) check() {
	s := w.cur
	if s == nil || !s.settledAt.IsZero() || len(w.pods) != w.target || w.good != w.target || len(w.hosts) != w.target {
		return
	}
	for h := range w.hosts {
		if !w.pods[h] {
			return
		}
	}
	s.settledAt = time.Now()
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

func (w *bigWatch) onPod(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok || !w.api.IsWorker(p.Labels) {
		return
	}
	_, draining := p.Annotations[harness.AnnotationDrainingSince]
	good := !deleted && p.Status.Phase == corev1.PodRunning && !draining && p.DeletionTimestamp == nil
	w.mu.Lock()
	defer w.mu.Unlock()
	if was, ok := w.pods[p.Name]; ok && was {
		w.good--
	}
	if deleted {
		delete(w.pods, p.Name)
	} else {
		w.pods[p.Name] = good
		if good {
			w.good++
		}
	}
	w.check()
}

// written counts a new version of an object in the current step.
func (w *bigWatch) written(kind, rv string, size int) {
	if w.lastRV[kind] == rv {
		return
	}
	w.lastRV[kind] = rv
	if w.cur == nil {
		return
	}
	switch kind {
	case "configmap":
		w.cur.configMap.add(size)
	case "role":
		w.cur.role.add(size)
	case "status":
		w.cur.status.add(size)
	}
}

func (w *bigWatch) onConfigMap(obj any, deleted bool) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok || deleted || cm.Name != bigJobName+harness.ConfigSuffix {
		return
	}
	b, _ := json.Marshal(cm)
	hosts := map[string]bool{}
	for h := range w.api.ListedPods(cm.Data[harness.DiscoverHostsKey]) {
		if h != bigJobName+harness.LauncherSuffix {
			hosts[h] = true
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.written("configmap", cm.ResourceVersion, len(b))
	w.hosts = hosts
	w.check()
}

func (w *bigWatch) onRole(obj any, deleted bool) {
	r, ok := obj.(*rbacv1.Role)
	if !ok || deleted || r.Name != bigJobName+harness.LauncherSuffix {
		return
	}
	b, _ := json.Marshal(r)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.written("role", r.ResourceVersion, len(b))
}

func (w *bigWatch) onJob(obj any, deleted bool) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || deleted || u.GetName() != bigJobName {
		return
	}
	status, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status")
	b, _ := json.Marshal(status)
	w.mu.Lock()
	defer w.mu.Unlock()
	// A version counts as a status write only when the status changed:
	// the bench's own scale requests write the spec.
	if string(b) == w.lastState {
		return
	}
	w.lastState = string(b)
	w.written("status", u.GetResourceVersion(), len(b))
}

// watch starts the informers of the big job's namespace.
func (w *bigWatch) watch(cl *cluster, api harness.API) (stop func(), err error) {
	// The bench keeps only what it counts of the pods.
	strip := func(obj any) (any, error) {
		if p, ok := obj.(*corev1.Pod); ok {
			p.ManagedFields = nil
			p.Spec = corev1.PodSpec{}
			p.Status = corev1.PodStatus{Phase: p.Status.Phase}
		}
		return obj, nil
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cl.Kube, 0, informers.WithNamespace(bigJobNamespace))
	podFactory := informers.NewSharedInformerFactoryWithOptions(cl.Kube, 0, informers.WithNamespace(bigJobNamespace), informers.WithTransform(strip))
	dyn := dynamicinformer.NewFilteredDynamicSharedInformerFactory(cl.Dynamic, 0, bigJobNamespace, nil)
	handlers := []struct {
		inf cache.SharedIndexInformer
		on  func(obj any, deleted bool)
	}{
		{podFactory.Core().V1().Pods().Informer(), w.onPod},
		{factory.Core().V1().ConfigMaps().Informer(), w.onConfigMap},
		{dyn.ForResource(api.GVR()).Informer(), w.onJob},
	}
	if !api.ReachBySlices {
		handlers = append(handlers, struct {
			inf cache.SharedIndexInformer
			on  func(obj any, deleted bool)
		}{factory.Rbac().V1().Roles().Informer(), w.onRole})
	}
	for _, h := range handlers {
		if _, err := h.inf.AddEventHandler(harness.EventHandlers(h.on)); err != nil {
			return nil, err
		}
	}
	ch := make(chan struct{})
	factory.Start(ch)
	podFactory.Start(ch)
	dyn.Start(ch)
	factory.WaitForCacheSync(ch)
	podFactory.WaitForCacheSync(ch)
	dyn.WaitForCacheSync(ch)
	return func() {
		close(ch)
		factory.Shutdown()
		podFactory.Shutdown()
		dyn.Shutdown()
	}, nil
}

// operatorSyncs reads the operator's sync count from its /metrics.
func operatorSyncs(ctx context.Context, op *harness.Operator) (float64, bool) {
	text, err := op.Get(ctx, "/metrics")
	if err != nil {
		return 0, false
	}
	// A histogram vector shows no series before its first observation:
	// an operator that answers without one has synced nothing yet.
	n, _ := syncCount(text)
	return n, true
}

// waitQuiet waits until the operator's sync count has not moved for a
// second (at most 30 s): a fresh operator first syncs every job of the
// cluster, which is no part of any step.
func waitQuiet(ctx context.Context, op *harness.Operator) error {
	last, _ := operatorSyncs(ctx, op)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if err := sleepCtx(ctx, op, time.Second); err != nil {
			return err
		}
		n, _ := operatorSyncs(ctx, op)
		if n == last {
			return nil
		}
		last = n
	}
	return nil
}

func runBigJob(ctx context.Context, o *options, cl *cluster) (*bigResult, error) {
	res := &bigResult{workers: o.bigWorkers, step: o.bigStep, maxReplicas: o.bigMaxReplicas()}
	if err := cl.FreshNamespace(ctx, bigJobNamespace); err != nil {
		return nil, err
	}
	w := newBigWatch(o.api)
	stopWatch, err := w.watch(cl, o.api)
	if err != nil {
		return nil, err
	}
	defer stopWatch()
	op, err := startOperator(ctx, o, cl.OperatorKubeconfig, filepath.Join(o.localDir, "operator-bigjob.log"))
	if err != nil {
		return nil, err
	}
	defer op.Stop()
	if err := waitQuiet(ctx, op); err != nil {
		return nil, err
	}

	steps := []struct {
		name     string
		from, to int
	}{
		{"create", 0, o.bigWorkers},
		{"shrink", o.bigWorkers, o.bigWorkers - o.bigStep},
		{"grow", o.bigWorkers - o.bigStep, o.bigWorkers},
	}
	for _, st := range steps {
		s := &bigStep{name: st.name, from: st.from, to: st.to}
		res.steps = append(res.steps, s)
		cpu0, err0 := cpuOf(op)
		syncs0, ok0 := operatorSyncs(ctx, op)
		w.begin(s)
		s.start = time.Now()
		logf("bigjob: %s, %d -> %d workers", s.name, s.from, s.to)
		if s.name == "create" {
			ep := &kubeflow.ElasticPolicy{
				MinReplicas:  ptr.To(int32(1)),
				MaxReplicas:  ptr.To(int32(res.maxReplicas)),
				DrainSeconds: ptr.To(int32(o.drainSeconds)),
			}
			if err := o.api.CreateJob(ctx, cl.Dynamic, harness.NewJob(bigJobNamespace, bigJobName, s.to, ep)); err != nil {
				return nil, fmt.Errorf("creating MPIJob %s: %w", bigJobName, err)
			}
		} else if err := scaleJob(ctx, o, cl, bigJobNamespace, bigJobName, s.to); err != nil {
			return nil, fmt.Errorf("scaling MPIJob %s to %d: %w", bigJobName, s.to, err)
		}
		settled, err := waitBigStep(ctx, o, w, op, s)
		if err != nil {
			return nil, err
		}
		if settled {
			if err := sleepCtx(ctx, op, time.Until(s.settledAt.Add(stepTail))); err != nil {
				return nil, err
			}
		}
		cpu1, err1 := cpuOf(op)
		syncs1, ok1 := operatorSyncs(ctx, op)
		s.cpu, s.cpuOK = cpu1-cpu0, err0 == nil && err1 == nil
		s.syncs, s.syncsOK = syncs1-syncs0, ok0 && ok1
		if !settled {
			res.unsettled = append(res.unsettled, s.name)
			logf("bigjob: %s did not settle within %s; the scenario stops here", s.name, o.bigTimeout)
			break
		}
		logf("bigjob: %s settled in %s; operator CPU %s, %.0f syncs", s.name, harness.FmtDur(s.settledAt.Sub(s.start)), harness.FmtDur(s.cpu), s.syncs)
	}
	// The writes after the last step's tail belong to no step.
	w.mu.Lock()
	w.cur = nil
	w.mu.Unlock()
	if res.mem, err = memoryOf(op); err != nil {
		return nil, err
	}
	op.Stop()
	res.log = op.ScanLog()
	return res, nil
}

// waitBigStep waits until the step settles (true), --big-timeout passes
// (false), or the operator dies or ctx ends (error). It logs progress
// every 15 s.
func waitBigStep(ctx context.Context, o *options, w *bigWatch, op *harness.Operator, s *bigStep) (bool, error) {
	deadline := time.After(o.bigTimeout)
	progress := time.NewTicker(15 * time.Second)
	defer progress.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		w.mu.Lock()
		done := !s.settledAt.IsZero()
		pods, good, listed := len(w.pods), w.good, len(w.hosts)
		w.mu.Unlock()
		if done {
			return true, nil
		}
		if err := op.DiedErr(); err != nil {
			return false, err
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-deadline:
			return false, nil
		case <-progress.C:
			logf("bigjob: %s: %s: %d worker pods, %d Running (not draining), %d listed; want %d",
				s.name, harness.FmtDur(time.Since(s.start)), pods, good, listed, s.to)
		case <-w.changed:
		case <-tick.C:
		}
	}
}

// fmtBytes prints a size as bytes, KiB or MiB.
func fmtBytes(b int64) string {
	switch {
	case b < 1<<10:
		return fmt.Sprintf("%d B", b)
	case b < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	default:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	}
}

// fmtCPU prints a small CPU time finely: microseconds below a millisecond,
// milliseconds with two decimals below a second.
func fmtCPU(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%d µs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	default:
		return harness.FmtDur(d)
	}
}
