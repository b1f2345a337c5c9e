package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/tools/cache"
)

// The recorder follows the pods, ConfigMaps and Roles of the bench's
// namespace through watch events and stamps every change with the time the
// bench received it. All latencies are differences of such stamps, so the
// watch delay is on both ends of every measure.
//
// Orderings that must hold whatever the timing ("deleted while listed",
// "Role before pod") are decided with resourceVersions instead: the bench's
// cluster has a single etcd, whose revision orders every write to any
// resource.

// Names and annotations the operator uses (see pkg/controller/names.go).
const (
	labelJobName            = "mpi-job-name"
	labelRole               = "mpi-job-role"
	annotationDrainingSince = "mpi-operator.kubeflow.org/draining-since"
	discoverHostsKey        = "discover_hosts.sh"
	configSuffix            = "-config"
	launcherSuffix          = "-launcher"
)

type hostsVersion struct {
	t     time.Time
	rv    int64
	hosts map[string]bool
}

type roleVersion struct {
	t    time.Time
	rv   int64
	exec map[string]bool
}

// podRec is the life of one worker pod as the bench saw it.
type podRec struct {
	name    string
	addedAt time.Time
	addedRV int64
	// runningAt is when the bench first saw phase Running.
	runningAt time.Time
	// listedAt is when the bench first saw discover_hosts.sh list it.
	listedAt time.Time
	listedRV int64
	// drainingAt is when it was first seen with the draining annotation.
	drainingAt time.Time
	drainingRV int64
	// deletingAt is when it was first seen deleted: a deletionTimestamp,
	// or a DELETE event.
	deletingAt time.Time
	deletingRV int64
	goneAt     time.Time
	finished   bool
	// initial: one of the workers the job was created with.
	initial bool
	// flagged is set once the pod is in the listed-after-drain anomaly.
	flagged bool
}

func (p *podRec) live() bool {
	return p.drainingAt.IsZero() && p.deletingAt.IsZero() && p.goneAt.IsZero() && !p.finished
}

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

	newPods []*podRec // growth: the first to-from workers created after at
	victims []*podRec // shrink: the first from-to workers marked draining after at
	podsAt  time.Time // growth: when the bench saw the last new worker
	roleAt  time.Time // growth: first Role version after at allowing every new worker
	goneAt  time.Time // shrink: discover_hosts.sh lists none of the victims
	// settledAt: to live workers, all Running, exactly those listed,
	// victims deleted.
	settledAt time.Time
}

func (r *resizeRec) grow() bool     { return r.to > r.from }
func (r *resizeRec) excluded() bool { return r.overlapping || r.superseded || r.err != nil }
func (r *resizeRec) String() string {
	return fmt.Sprintf("resize #%d of %s from %d to %d workers", r.seq, r.job.name, r.from, r.to)
}

type jobRec struct {
	name      string
	createdAt time.Time
	initial   int
	// desired is the worker replicas the bench last asked for.
	desired int
	// listedAt is when discover_hosts.sh first listed every initial worker.
	listedAt time.Time
	hosts    []hostsVersion
	roles    []roleVersion
	pods     map[string]*podRec
	cur      *resizeRec
	// early holds names listed before the bench saw their pod.
	early map[string]hostsVersion
}

func (j *jobRec) currentHosts() *hostsVersion {
	if len(j.hosts) == 0 {
		return nil
	}
	return &j.hosts[len(j.hosts)-1]
}

// hostsBefore is the discover_hosts.sh content of the newest ConfigMap
// write older than revision rv.
func (j *jobRec) hostsBefore(rv int64) map[string]bool {
	for i := len(j.hosts) - 1; i >= 0; i-- {
		if j.hosts[i].rv < rv {
			return j.hosts[i].hosts
		}
	}
	return nil
}

// idle tells whether the job has settled after its creation or last resize.
func (j *jobRec) idle() bool {
	if j.cur == nil {
		return !j.listedAt.IsZero()
	}
	return !j.cur.settledAt.IsZero()
}

func (j *jobRec) livePods() []*podRec {
	var out []*podRec
	for _, p := range j.pods {
		if p.live() {
			out = append(out, p)
		}
	}
	return out
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
	jobs   map[string]*jobRec
	events []eventStamp
	anomalies
	// changed is signalled (without blocking) after each event.
	changed chan struct{}
}

func newRecorder() *recorder {
	return &recorder{jobs: map[string]*jobRec{}, changed: make(chan struct{}, 1)}
}

// addJob registers a job before it is created, so that every event of its
// children finds it.
func (r *recorder) addJob(name string, workers int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.jobs[name] = &jobRec{name: name, initial: workers, desired: workers, createdAt: time.Now(),
		pods: map[string]*podRec{}, early: map[string]hostsVersion{}}
}

func (r *recorder) notify() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func parseRV(s string) int64 {
	v, _ := strconv.ParseInt(s, 10, 64)
	return v
}

// parseDiscoverHosts returns the host names of a discover_hosts.sh: one
// "echo <host>:<slots>" line per host.
func parseDiscoverHosts(script string) map[string]bool {
	hosts := map[string]bool{}
	for _, line := range strings.Split(script, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "echo ")
		if !ok {
			continue
		}
		rest = strings.Trim(strings.TrimSpace(rest), `"'`)
		if i := strings.LastIndexByte(rest, ':'); i > 0 {
			rest = rest[:i]
		}
		if rest != "" {
			hosts[rest] = true
		}
	}
	return hosts
}

func unwrap(obj any) (any, bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj, true
	}
	return obj, false
}

// handlers returns the event handlers for one kind of object.
func (r *recorder) handlers(kind string) cache.ResourceEventHandlerFuncs {
	on := func(obj any, deleted bool) {
		obj, tombstone := unwrap(obj)
		r.mu.Lock()
		now := time.Now()
		r.events = append(r.events, eventStamp{now, kind})
		switch o := obj.(type) {
		case *corev1.Pod:
			r.onPod(now, o, deleted, tombstone)
		case *corev1.ConfigMap:
			if !deleted {
				r.onConfigMap(now, o)
			}
		case *rbacv1.Role:
			if !deleted {
				r.onRole(now, o)
			}
		}
		r.mu.Unlock()
		r.notify()
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { on(obj, false) },
		UpdateFunc: func(_, obj any) { on(obj, false) },
		DeleteFunc: func(obj any) { on(obj, true) },
	}
}

func (r *recorder) onPod(now time.Time, pod *corev1.Pod, deleted, tombstone bool) {
	if pod.Labels[labelRole] != "worker" {
		return
	}
	j := r.jobs[pod.Labels[labelJobName]]
	if j == nil {
		return
	}
	rv := parseRV(pod.ResourceVersion)
	p := j.pods[pod.Name]
	if p == nil {
		p = &podRec{name: pod.Name, addedAt: now, addedRV: rv}
		j.pods[pod.Name] = p
		r.attributeNewPod(j, p)
		if v, ok := j.early[pod.Name]; ok {
			p.listedAt, p.listedRV = v.t, v.rv
			delete(j.early, pod.Name)
		}
	}
	switch pod.Status.Phase {
	case corev1.PodRunning:
		if p.runningAt.IsZero() {
			p.runningAt = now
		}
	case corev1.PodSucceeded, corev1.PodFailed:
		p.finished = true
	}
	if _, ok := pod.Annotations[annotationDrainingSince]; ok && p.drainingAt.IsZero() {
		p.drainingAt, p.drainingRV = now, rv
		r.attributeDrain(j, p)
	}
	if (pod.DeletionTimestamp != nil || deleted) && p.deletingAt.IsZero() {
		p.deletingAt, p.deletingRV = now, rv
		listed := false
		if tombstone {
			// The final state is unknown, and so is its revision: go by
			// what the bench saw last.
			if h := j.currentHosts(); h != nil {
				listed = h.hosts[p.name]
			}
		} else {
			listed = j.hostsBefore(rv)[p.name]
		}
		if listed {
			r.deletedWhileListed = append(r.deletedWhileListed, p.name)
		}
	}
	if deleted {
		p.goneAt = now
	}
	r.check(j, now)
}

// attributeNewPod gives a new worker to the replica change that asked for
// it.
func (r *recorder) attributeNewPod(j *jobRec, p *podRec) {
	rz := j.cur
	switch {
	case rz == nil:
		p.initial = true
		if len(j.pods) > j.initial {
			r.unexpectedPods = append(r.unexpectedPods, p.name)
		}
	case rz.grow() && len(rz.newPods) < rz.to-rz.from:
		rz.newPods = append(rz.newPods, p)
	case !rz.overlapping:
		r.unexpectedPods = append(r.unexpectedPods, p.name)
	}
}

func (r *recorder) attributeDrain(j *jobRec, p *podRec) {
	rz := j.cur
	switch {
	case rz != nil && !rz.grow() && len(rz.victims) < rz.from-rz.to:
		rz.victims = append(rz.victims, p)
	case rz == nil || !rz.overlapping:
		r.unexpectedDrains = append(r.unexpectedDrains, p.name)
	}
}

func (r *recorder) onConfigMap(now time.Time, cm *corev1.ConfigMap) {
	name, ok := strings.CutSuffix(cm.Name, configSuffix)
	if !ok {
		return
	}
	j := r.jobs[name]
	if j == nil {
		return
	}
	hosts := parseDiscoverHosts(cm.Data[discoverHostsKey])
	if cur := j.currentHosts(); cur != nil && maps.Equal(cur.hosts, hosts) {
		return
	}
	v := hostsVersion{t: now, rv: parseRV(cm.ResourceVersion), hosts: hosts}
	j.hosts = append(j.hosts, v)
	for h := range hosts {
		p := j.pods[h]
		if p == nil {
			if _, seen := j.early[h]; !seen && !strings.HasSuffix(h, launcherSuffix) {
				j.early[h] = v
			}
			continue
		}
		if p.listedAt.IsZero() {
			p.listedAt, p.listedRV = now, v.rv
		}
		drained := p.drainingRV != 0 && p.drainingRV < v.rv
		deleting := p.deletingRV != 0 && p.deletingRV < v.rv
		if (drained || deleting) && !p.flagged {
			p.flagged = true
			r.listedAfterDrain = append(r.listedAfterDrain, p.name)
		}
	}
	r.check(j, now)
}

func (r *recorder) onRole(now time.Time, role *rbacv1.Role) {
	name, ok := strings.CutSuffix(role.Name, launcherSuffix)
	if !ok {
		return
	}
	j := r.jobs[name]
	if j == nil {
		return
	}
	exec := map[string]bool{}
	for _, rule := range role.Rules {
		if slices.Contains(rule.Resources, "pods/exec") {
			for _, n := range rule.ResourceNames {
				exec[n] = true
			}
		}
	}
	if n := len(j.roles); n > 0 && maps.Equal(j.roles[n-1].exec, exec) {
		return
	}
	j.roles = append(j.roles, roleVersion{t: now, rv: parseRV(role.ResourceVersion), exec: exec})
	r.check(j, now)
}

// check moves the job's creation or current resize forward.
func (r *recorder) check(j *jobRec, now time.Time) {
	hosts := j.currentHosts()
	if j.cur == nil {
		if j.listedAt.IsZero() && hosts != nil && len(hosts.hosts) == j.initial && j.settledOn(hosts, j.initial) {
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
			rz.podsAt = rz.newPods[len(rz.newPods)-1].addedAt
		}
		if rz.roleAt.IsZero() {
			for _, v := range j.roles {
				if !v.t.Before(rz.at) && allIn(v.exec, rz.newPods) {
					rz.roleAt = v.t
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
	if rz.grow() && (rz.podsAt.IsZero() || rz.roleAt.IsZero()) {
		return
	}
	if !rz.grow() && rz.goneAt.IsZero() {
		return
	}
	rz.settledAt = now
}

// settledOn: want live workers, all Running, exactly those listed, and no
// drained worker left.
func (j *jobRec) settledOn(hosts *hostsVersion, want int) bool {
	live := 0
	for _, p := range j.pods {
		if p.goneAt.IsZero() && !p.drainingAt.IsZero() {
			return false
		}
		if !p.live() {
			continue
		}
		if p.runningAt.IsZero() || !hosts.hosts[p.name] {
			return false
		}
		live++
	}
	return live == want && len(hosts.hosts) == want
}

func allIn(set map[string]bool, pods []*podRec) bool {
	for _, p := range pods {
		if !set[p.name] {
			return false
		}
	}
	return true
}

// victimsGone is when discover_hosts.sh stopped listing every victim of a
// shrink: the first ConfigMap version after the resize that lists none of
// them (or the resize itself, when the version current then listed none),
// and no earlier than the last victim's draining mark.
func victimsGone(j *jobRec, rz *resizeRec) time.Time {
	listsNone := func(v hostsVersion) bool {
		for _, p := range rz.victims {
			if v.hosts[p.name] {
				return false
			}
		}
		return true
	}
	// The first version the bench received at or after the resize.
	first := slices.IndexFunc(j.hosts, func(v hostsVersion) bool { return !v.t.Before(rz.at) })
	if first < 0 {
		first = len(j.hosts)
	}
	var t0 time.Time
	if first > 0 && listsNone(j.hosts[first-1]) {
		t0 = rz.at
	} else {
		for _, v := range j.hosts[first:] {
			if listsNone(v) {
				t0 = v.t
				break
			}
		}
	}
	if t0.IsZero() {
		return time.Time{}
	}
	for _, p := range rz.victims {
		if p.drainingAt.After(t0) {
			t0 = p.drainingAt
		}
	}
	return t0
}
