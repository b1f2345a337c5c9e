package main

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// The recorder follows the pods, ConfigMaps and Roles (v1) or
// EndpointSlices (v2beta1) of the bench's namespace through a harness.History, which stamps every change with the
// time the bench received it, and gives each new or drained worker to the
// replica change that asked for it. All latencies are differences of such
// stamps, so the watch delay is on both ends of every measure.

// resizeRec is one change of a job's worker replicas.
type resizeRec struct {
	job      *jobRec
	seq      int
	at       time.Time // just before the bench's request
	from, to int       // live workers at that moment -> new replicas
	// overlapping is set when the resize was issued while the job's
	// previous one had not settled, superseded on the previous one: their
	// measures would mix, so neither is in the statistics.
	overlapping, superseded bool
	err                     error

	newPods []*harness.Worker // growth: the first to-from workers created after at
	victims []*harness.Worker // shrink: the first from-to workers marked draining after at
	podsAt  time.Time         // growth: when the bench saw the last new worker
	// growth: the first version after at of the Role (v1) or the
	// EndpointSlices (v2beta1) that makes every new worker reachable.
	reachAt time.Time
	goneAt  time.Time // shrink: discover_hosts.sh lists none of the victims
	// settledAt: to live workers, all Running, exactly those listed,
	// victims deleted.
	settledAt time.Time
}

func (r *resizeRec) grow() bool     { return r.to > r.from }
func (r *resizeRec) excluded() bool { return r.overlapping || r.superseded || r.err != nil }
func (r *resizeRec) String() string {
	return fmt.Sprintf("resize #%d of %s from %d to %d workers", r.seq, r.job.Name, r.from, r.to)
}

type jobRec struct {
	*harness.JobHistory
	createdAt time.Time
	initial   int
	// desired is the worker replicas the bench last asked for.
	desired int
	// listedAt is when discover_hosts.sh first listed every initial worker.
	listedAt time.Time
	cur      *resizeRec
	// initialWorkers are the workers the job was created with.
	initialWorkers map[*harness.Worker]bool
}

// idle tells whether the job has settled after its creation or last resize.
func (j *jobRec) idle() bool {
	if j.cur == nil {
		return !j.listedAt.IsZero()
	}
	return !j.cur.settledAt.IsZero()
}

// anomalies are things the operator must never do.
type anomalies struct {
	// deletedWhileListed: deleted while the ConfigMap write before the
	// deletion listed the worker.
	deletedWhileListed []string
	// listedAfterDrain: a ConfigMap write after the worker was marked
	// draining (or deleted) still listed it.
	listedAfterDrain []string
	// unexpectedPods and unexpectedDrains: workers created or marked
	// draining beyond what the replica changes asked for.
	unexpectedPods, unexpectedDrains []string
}

type eventStamp struct {
	t    time.Time
	kind string
}

type recorder struct {
	mu     sync.Mutex
	hist   *harness.History
	jobs   map[string]*jobRec
	events []eventStamp
	// unexpectedPods and unexpectedDrains: see anomalies.
	unexpectedPods, unexpectedDrains []string
	// changed is signalled (without blocking) after each event.
	changed chan struct{}
}

func newRecorder(api harness.API) *recorder {
	return &recorder{hist: harness.NewHistory(api), jobs: map[string]*jobRec{}, changed: make(chan struct{}, 1)}
}

// addJob registers a job before it is created, so that every event of its
// children finds it.
func (r *recorder) addJob(name string, workers int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.jobs[name] = &jobRec{JobHistory: r.hist.AddJob(name), initial: workers, desired: workers, createdAt: time.Now(),
		initialWorkers: map[*harness.Worker]bool{}}
}

func (r *recorder) anomalies() anomalies {
	return anomalies{
		deletedWhileListed: r.hist.DeletedWhileListed,
		listedAfterDrain:   r.hist.ListedAfterDrain,
		unexpectedPods:     r.unexpectedPods,
		unexpectedDrains:   r.unexpectedDrains,
	}
}

func (r *recorder) notify() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// handlers returns the event handlers for one kind of object.
func (r *recorder) handlers(kind string) cache.ResourceEventHandlerFuncs {
	return harness.EventHandlers(func(obj any, deleted bool) {
		r.mu.Lock()
		now := time.Now()
		r.events = append(r.events, eventStamp{now, kind})
		if ob := r.hist.Observe(now, obj, deleted); ob.Job != nil {
			j := r.jobs[ob.Job.Name]
			if ob.NewWorker {
				r.attributeNewPod(j, ob.Worker)
			}
			if ob.Drained {
				r.attributeDrain(j, ob.Worker)
			}
			r.check(j, now)
		}
		r.mu.Unlock()
		r.notify()
	})
}

// attributeNewPod gives a new worker to the replica change that asked for
// it.
func (r *recorder) attributeNewPod(j *jobRec, p *harness.Worker) {
	rz := j.cur
	switch {
	case rz == nil:
		j.initialWorkers[p] = true
		if len(j.AllWorkers()) > j.initial {
			r.unexpectedPods = append(r.unexpectedPods, p.Name)
		}
	case rz.grow() && len(rz.newPods) < rz.to-rz.from:
		rz.newPods = append(rz.newPods, p)
	case !rz.overlapping:
		r.unexpectedPods = append(r.unexpectedPods, p.Name)
	}
}

func (r *recorder) attributeDrain(j *jobRec, p *harness.Worker) {
	rz := j.cur
	switch {
	case rz != nil && !rz.grow() && len(rz.victims) < rz.from-rz.to:
		rz.victims = append(rz.victims, p)
	case rz == nil || !rz.overlapping:
		r.unexpectedDrains = append(r.unexpectedDrains, p.Name)
	}
}

// check moves the job's creation or current resize forward.
func (r *recorder) check(j *jobRec, now time.Time) {
	hosts := j.CurrentHosts()
	if j.cur == nil {
		if j.listedAt.IsZero() && hosts != nil && len(hosts.Hosts) == j.initial && j.settledOn(hosts, j.initial) {
			j.listedAt = now
		}
		return
	}
	rz := j.cur
	if !rz.settledAt.IsZero() {
		return
	}
	if rz.grow() && len(rz.newPods) == rz.to-rz.from {
		if rz.podsAt.IsZero() {
			rz.podsAt = rz.newPods[len(rz.newPods)-1].AddedAt
		}
		if rz.reachAt.IsZero() {
			for _, v := range j.Reach {
				if !v.At.Before(rz.at) && allIn(v.Names, rz.newPods) {
					rz.reachAt = v.At
					break
				}
			}
		}
	}
	if !rz.grow() && len(rz.victims) == rz.from-rz.to && rz.goneAt.IsZero() {
		rz.goneAt = victimsGone(j, rz)
	}
	if hosts == nil || !j.settledOn(hosts, rz.to) {
		return
	}
	if rz.grow() && (rz.podsAt.IsZero() || rz.reachAt.IsZero()) {
		return
	}
	if !rz.grow() && rz.goneAt.IsZero() {
		return
	}
	rz.settledAt = now
}

// settledOn: want live workers, all Running, exactly those listed, and no
// drained worker left.
func (j *jobRec) settledOn(hosts *harness.HostsVersion, want int) bool {
	live := 0
	for _, p := range j.Workers {
		if p.GoneAt.IsZero() && !p.DrainingAt.IsZero() {
			return false
		}
		if !p.Live() {
			continue
		}
		if p.RunningAt.IsZero() || !hosts.Hosts[p.Name] {
			return false
		}
		live++
	}
	return live == want && len(hosts.Hosts) == want
}

func allIn(set map[string]bool, pods []*harness.Worker) bool {
	for _, p := range pods {
		if !set[p.Name] {
			return false
		}
	}
	return true
}

// resolveTimes are, for each worker that went Running and later had its
// name resolve, the time between the two (resolve); and for each worker
// listed after its name resolved, the time from the one to the other
// (listed): the operator's own part of Running -> listed.
func (j *jobRec) resolveTimes() (resolve, listed harness.Sample) {
	for _, w := range j.AllWorkers() {
		at := j.reachedAt(w)
		if at.IsZero() {
			continue
		}
		if !w.RunningAt.IsZero() {
			resolve = append(resolve, max(at.Sub(w.RunningAt), 0))
		}
		if !w.ListedAt.IsZero() {
			listed = append(listed, max(w.ListedAt.Sub(at), 0))
		}
	}
	return resolve, listed
}

// reachedAt is when the bench first saw the worker reachable, or zero.
func (j *jobRec) reachedAt(w *harness.Worker) time.Time {
	for _, v := range j.Reach {
		if v.Names[w.Name] && !v.At.Before(w.AddedAt) {
			return v.At
		}
	}
	return time.Time{}
}

// victimsGone is when discover_hosts.sh stopped listing every victim of a
// shrink: the first ConfigMap version after the resize that lists none of
// them (or the resize itself, when the version current then listed none).
// The victims' draining marks only tell which workers they are: the
// operators mark them after the write that unlists them, so that their
// drain counts from it.
func victimsGone(j *jobRec, rz *resizeRec) time.Time {
	listsNone := func(v harness.HostsVersion) bool {
		for _, p := range rz.victims {
			if v.Hosts[p.Name] {
				return false
			}
		}
		return true
	}
	// The first version the bench received at or after the resize.
	first := slices.IndexFunc(j.Hosts, func(v harness.HostsVersion) bool { return !v.At.Before(rz.at) })
	if first < 0 {
		first = len(j.Hosts)
	}
	var t0 time.Time
	if first > 0 && listsNone(j.Hosts[first-1]) {
		t0 = rz.at
	} else {
		for _, v := range j.Hosts[first:] {
			if listsNone(v) {
				t0 = v.At
				break
			}
		}
	}
	return t0
}
