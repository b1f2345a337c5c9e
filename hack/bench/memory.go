package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeflow/mpi-operator/test/harness"
)

const memoryNamespace = "mpi-bench-mem"

// memoryResult is what the memory scenario measured.
type memoryResult struct {
	pods, jobs, perJob int
	// reached are the worker pods created, Running and listed when the
	// scenario stopped waiting; complete is true when all were listed.
	created, running, listed int
	complete                 bool
	start                    time.Time
	// allCreated, allRunning, allListed: when the bench saw each count
	// reach pods (zero if it never did).
	allCreated, allRunning, allListed time.Time
	end                               time.Time
	// firstListed is when the bench first saw any worker listed.
	firstListed time.Time
	// discovery: each worker's time from Running to listed.
	discovery harness.Sample
	// resolve and resolvedListed split discovery where a worker's name
	// must resolve before it is listed (v2beta1): Running -> the name
	// resolves, the EndpointSlice controller's part; and the later of the
	// two -> listed, the operator's.
	resolve, resolvedListed harness.Sample
	// watched: the start as the bench's watch saw it.
	watched startFigures

	// The operator that created the pods.
	mem   procMemory
	goMem goMemory
	cpu   time.Duration
	// busy is the CPU the operator, the API server, etcd and the machine
	// used from the first create until every worker was listed.
	busy cpuWindow
	log  harness.LogSummary
	from time.Time

	// A fresh operator started with the pods in place.
	restarted    bool
	restartFrom  time.Time
	restartTo    time.Time
	restartMem   procMemory
	restartGoMem goMemory
	restartCPU   time.Duration
	restartLog   harness.LogSummary
	restartDelta string // changes of pods/ConfigMaps seen meanwhile

	audit []auditEvent
}

// memJobs is how many jobs hold memPods workers, memWorkersPerJob each.
func (o *options) memJobs() int {
	return (o.memPods + o.memWorkersPerJob - 1) / o.memWorkersPerJob
}

// counts are the worker pods of the memory namespace by state, and the
// workers listed in the discovery scripts.
type counts struct{ created, running, listed int }

func runMemory(ctx context.Context, o *options, cl *cluster) (*memoryResult, error) {
	res := &memoryResult{pods: o.memPods, jobs: o.memJobs(), perJob: o.memWorkersPerJob}
	// The other scenarios' objects are not part of this measure: their
	// namespaces are deleted at once, and waited for up to 3 minutes.
	var wg sync.WaitGroup
	for _, s := range []struct{ scenario, ns string }{
		{scenarioLatency, latencyNamespace}, {scenarioLoad, loadNamespace}, {scenarioBigJob, bigJobNamespace},
	} {
		if !o.runs(s.scenario) {
			continue
		}
		logf("memory: deleting namespace %s", s.ns)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cl.DeleteNamespace(ctx, s.ns, 3*time.Minute); err != nil {
				logf("memory: namespace %s not gone yet (%v); going on", s.ns, err)
			}
		}()
	}
	wg.Wait()
	if err := cl.FreshNamespace(ctx, memoryNamespace); err != nil {
		return nil, err
	}
	// The bench caches only what it counts.
	strip := func(obj any) (any, error) {
		if m, err := meta.Accessor(obj); err == nil {
			m.SetManagedFields(nil)
			m.SetAnnotations(nil)
		}
		if p, ok := obj.(*corev1.Pod); ok {
			p.Spec = corev1.PodSpec{}
			p.Status = corev1.PodStatus{Phase: p.Status.Phase}
		}
		return obj, nil
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cl.Kube, 0, informers.WithNamespace(memoryNamespace),
		informers.WithTransform(strip))
	podLister := factory.Core().V1().Pods().Lister()
	cmLister := factory.Core().V1().ConfigMaps().Lister()
	// Each worker's first Running and first listing, from watch events.
	var mu sync.Mutex
	runningAt, listedAt, resolvedAt := map[string]time.Time{}, map[string]time.Time{}, map[string]time.Time{}
	createdAt := map[string]time.Time{}
	onPod := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || !o.api.IsWorker(p.Labels) {
			return
		}
		mu.Lock()
		now := time.Now()
		if _, seen := createdAt[p.Name]; !seen {
			createdAt[p.Name] = now
		}
		if _, seen := runningAt[p.Name]; !seen && p.Status.Phase == corev1.PodRunning {
			runningAt[p.Name] = now
		}
		mu.Unlock()
	}
	onConfigMap := func(obj any) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok || !strings.HasSuffix(cm.Name, harness.ConfigSuffix) {
			return
		}
		hosts := o.api.ListedPods(cm.Data[harness.DiscoverHostsKey])
		mu.Lock()
		now := time.Now()
		for h := range hosts {
			if _, seen := listedAt[h]; !seen && !strings.HasSuffix(h, harness.LauncherSuffix) {
				listedAt[h] = now
			}
		}
		mu.Unlock()
	}
	onSlice := func(obj any) {
		slice, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			return
		}
		mu.Lock()
		now := time.Now()
		for name := range harness.SliceNames(slice) {
			if _, seen := resolvedAt[name]; !seen {
				resolvedAt[name] = now
			}
		}
		mu.Unlock()
	}
	if o.api.ReachBySlices {
		if _, err := factory.Discovery().V1().EndpointSlices().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: onSlice, UpdateFunc: func(_, obj any) { onSlice(obj) },
		}); err != nil {
			return nil, err
		}
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onPod, UpdateFunc: func(_, obj any) { onPod(obj) },
	}); err != nil {
		return nil, err
	}
	if _, err := factory.Core().V1().ConfigMaps().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onConfigMap, UpdateFunc: func(_, obj any) { onConfigMap(obj) },
	}); err != nil {
		return nil, err
	}
	stop := make(chan struct{})
	defer func() {
		close(stop)
		factory.Shutdown()
	}()
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	count := func() (c counts) {
		pods, _ := podLister.List(labels.SelectorFromSet(labels.Set{o.api.LabelRole: "worker"}))
		for _, p := range pods {
			c.created++
			if p.Status.Phase == corev1.PodRunning {
				c.running++
			}
		}
		cms, _ := cmLister.List(labels.Everything())
		for _, cm := range cms {
			if !strings.HasSuffix(cm.Name, harness.ConfigSuffix) {
				continue
			}
			for h := range o.api.ListedPods(cm.Data[harness.DiscoverHostsKey]) {
				if !strings.HasSuffix(h, harness.LauncherSuffix) {
					c.listed++
				}
			}
		}
		return c
	}

	op, err := startOperator(ctx, o, cl.OperatorKubeconfig, filepath.Join(o.localDir, "operator-memory.log"))
	if err != nil {
		return nil, err
	}
	defer op.Stop()
	res.from = op.Started

	logf("memory: creating %d jobs with %d worker pods in all", res.jobs, res.pods)
	res.busy.begin(op, cl)
	res.start = time.Now()
	left := res.pods
	for i := range res.jobs {
		n := min(left, res.perJob)
		left -= n
		job := harness.NewJob(memoryNamespace, fmt.Sprintf("mem-%03d", i), n, nil)
		if err := o.api.CreateJob(ctx, cl.Dynamic, job); err != nil {
			return nil, fmt.Errorf("creating MPIJob %s: %w", job.Name, err)
		}
	}

	deadline := res.start.Add(o.memTimeout)
	lastLog := time.Now()
	var c counts
	for {
		if err := op.DiedErr(); err != nil {
			return nil, err
		}
		c = count()
		now := time.Now()
		if res.allCreated.IsZero() && c.created >= res.pods {
			res.allCreated = now
		}
		if res.allRunning.IsZero() && c.running >= res.pods {
			res.allRunning = now
		}
		if res.firstListed.IsZero() && c.listed > 0 {
			res.firstListed = now
		}
		if c.listed >= res.pods {
			res.allListed = now
			res.complete = true
			break
		}
		if now.After(deadline) {
			break
		}
		if now.Sub(lastLog) >= 15*time.Second {
			lastLog = now
			m, _ := memoryOf(op)
			logf("memory: %s: %d created, %d Running, %d listed of %d; operator RSS %s, peak %s",
				now.Sub(res.start).Round(time.Second), c.created, c.running, c.listed, res.pods, fmtMiB(m.RSS), fmtMiB(m.HWM))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	res.end = time.Now()
	res.busy.end(op)
	res.created, res.running, res.listed = c.created, c.running, c.listed
	if res.complete {
		logf("memory: all %d workers listed after %s", res.pods, res.allListed.Sub(res.start).Round(time.Second))
	} else {
		logf("memory: stopped waiting after %s: %d created, %d Running, %d listed of %d",
			o.memTimeout, c.created, c.running, c.listed, res.pods)
	}
	if res.mem, err = memoryOf(op); err != nil {
		return nil, err
	}
	res.goMem = goMemoryOf(ctx, op)
	mu.Lock()
	for name, r := range runningAt {
		if l, ok := listedAt[name]; ok {
			res.discovery = append(res.discovery, max(l.Sub(r), 0))
		}
		if at, ok := resolvedAt[name]; ok {
			res.resolve = append(res.resolve, max(at.Sub(r), 0))
			if l, ok := listedAt[name]; ok {
				from := at
				if r.After(at) {
					from = r
				}
				res.resolvedListed = append(res.resolvedListed, max(l.Sub(from), 0))
			}
		}
	}
	res.watched = newStartFigures(createdAt, runningAt, listedAt)
	mu.Unlock()
	if res.cpu, err = cpuOf(op); err != nil {
		return nil, err
	}
	op.Stop()
	res.log = op.ScanLog()

	if res.complete && o.memRestart > 0 {
		// A fresh operator meets the pods all at once in its first list.
		before := count()
		op2, err := startOperator(ctx, o, cl.OperatorKubeconfig, filepath.Join(o.localDir, "operator-memory-restart.log"))
		if err != nil {
			return nil, err
		}
		defer op2.Stop()
		res.restartFrom = op2.Started
		logf("memory: restarted the operator; watching it for %s", o.memRestart)
		if err := sleepCtx(ctx, op2, o.memRestart); err != nil {
			return nil, err
		}
		res.restartTo = time.Now()
		after := count()
		res.restartDelta = fmt.Sprintf("%d created, %d Running, %d listed before; %d, %d, %d after",
			before.created, before.running, before.listed, after.created, after.running, after.listed)
		if res.restartMem, err = memoryOf(op2); err != nil {
			return nil, err
		}
		res.restartGoMem = goMemoryOf(ctx, op2)
		if res.restartCPU, err = cpuOf(op2); err != nil {
			return nil, err
		}
		op2.Stop()
		res.restartLog = op2.ScanLog()
		res.restarted = true
	}
	if cl.auditLog != "" {
		if res.audit, err = cl.readAudit(); err != nil {
			return nil, fmt.Errorf("reading the audit log: %w", err)
		}
	}
	return res, nil
}

// startFigures are the times of a large start as the bench's watch events
// show them.
type startFigures struct {
	// created: workers seen created; firstCreated and lastCreated are the
	// first and the last creation seen.
	created                   int
	firstCreated, lastCreated time.Time
	// lastRunning is when the last worker was seen Running: no operator
	// can list every worker earlier. lastListed is when the last worker
	// was first listed.
	lastRunning, lastListed time.Time
	running, listed         int
}

func newStartFigures(createdAt, runningAt, listedAt map[string]time.Time) startFigures {
	var f startFigures
	latest := func(m map[string]time.Time) time.Time {
		var t time.Time
		for _, v := range m {
			if v.After(t) {
				t = v
			}
		}
		return t
	}
	f.created, f.running, f.listed = len(createdAt), len(runningAt), len(listedAt)
	f.lastCreated, f.lastRunning, f.lastListed = latest(createdAt), latest(runningAt), latest(listedAt)
	for _, v := range createdAt {
		if f.firstCreated.IsZero() || v.Before(f.firstCreated) {
			f.firstCreated = v
		}
	}
	return f
}

// creationRate is the pods created per second from the first creation the
// watch saw to the last.
func (f startFigures) creationRate() (float64, bool) {
	d := f.lastCreated.Sub(f.firstCreated)
	if f.created < 2 || d <= 0 {
		return 0, false
	}
	return float64(f.created-1) / d.Seconds(), true
}
