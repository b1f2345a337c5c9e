package elastic

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Holder tells whether a pod the job does not control holds a worker's
// name. The launcher may exec only into the job's own pods, and its Role
// names a worker before the worker exists, so such a name is never planned.
type Holder int

const (
	// NameFree means no pod holds the name, or the job's own does.
	NameFree Holder = iota
	// NameHeld means a pod the job does not control holds the name.
	NameHeld
	// NameLeaving means such a pod holds the name and is being deleted.
	NameLeaving
)

// Spec is what the planner needs to know of a job.
type Spec struct {
	// Elastic is true for a job with an elastic policy: its workers take
	// indices it has never used, and a failed worker is replaced. A fixed
	// job keeps the workers 0..Replicas-1.
	Elastic bool
	// Replicas is how many workers the job wants.
	Replicas int
	// DrainPeriod is how long a worker chosen for removal stays out of
	// discover_hosts.sh before it is deleted.
	DrainPeriod time.Duration
	// WorkerName is the pod name of the worker of an index; required.
	WorkerName func(index int) string
	// Listable, when set, tells whether a live Running worker may be listed
	// in Hosts.Running yet (for instance once its DNS name resolves). A
	// worker it refuses is otherwise planned as any live worker: it counts
	// towards Replicas and is in Exec and Hosts.Desired. Nil lists every
	// live Running worker.
	Listable func(Worker) bool
	// Listed are the workers that the job's discover_hosts.sh lists now.
	// Listable decides only a worker's first listing: a live Running
	// worker listed already stays listed, so that a moment when its name
	// does not resolve (the EndpointSlice controller moving its endpoint
	// from one slice to another) does not take it from the launcher. For
	// the same reason no worker is created under a name the script still
	// lists: the listing of the pod gone must be written away first, or
	// the new pod would inherit it before its own name resolves.
	Listed map[string]bool
	// MaxPods, when above zero, bounds the workers the job has at once
	// whose names the Role and the files carry: listed, draining, or about
	// to be created. Scaling in and out faster than workers drain would
	// otherwise pile draining workers up without end, and with them the
	// size of the Role and of every write of it. Creations beyond it wait
	// for drained workers to go (Plan.HeldBack).
	MaxPods int
}

// listable tells whether a live Running worker goes in Hosts.Running: it
// is listed already, or Spec.Listable (nil for any) accepts it.
func (s Spec) listable(w Worker) bool {
	return s.Listable == nil || s.Listed[w.Pod.Name] || s.Listable(w)
}

// Hosts are the worker names that a job's files list, in index order.
type Hosts struct {
	// Desired are the workers the job wants: the hostfile.
	Desired []string
	// Running are the workers the launcher may use now: discover_hosts.sh.
	Running []string
}

// Plan is what one sync does to a job's workers.
type Plan struct {
	// Create are the indices of workers to create, in ascending order.
	Create []int
	// Drain are live workers to mark draining now.
	Drain []*corev1.Pod
	// Remove are workers to delete now: drained long enough, or finished
	// outside a fixed job's range. None of them is in Hosts.Running.
	Remove []*corev1.Pod
	// Hosts are the contents of the hostfile and discover_hosts.sh.
	Hosts Hosts
	// Exec are the workers the launcher may exec into, in index order:
	// every worker that exists and has not finished, and every worker about
	// to be created. No name that a pod of someone else's holds is among
	// them.
	Exec []string
	// InTheWay are the names of a fixed job's workers that pods the job
	// does not control hold; Blocked are those of them that are not being
	// deleted.
	InTheWay, Blocked []string
	// Requeue is the wait until the next drained worker may be deleted;
	// zero for none.
	Requeue time.Duration
	// NextIndex is the lowest index above every worker an elastic job has
	// had, to record (State.NextIndex) whenever the hosts change; zero for a
	// fixed job. A worker is listed in discover_hosts.sh, and so can be
	// blacklisted by Horovod, only through a write that records an index
	// above its own. Workers about to be created do not raise it: if their
	// creation fails, the retry gives out the same names.
	NextIndex int
	// HeldBack is how many creations Spec.MaxPods holds back, and Pods the
	// workers it counts; zero when it holds none.
	HeldBack, Pods int
}

// PlanWorkers decides the next step for a job's workers, sorted by index as
// ParseWorkers returns them. nextIndex is the lowest index the job has
// never used, as last recorded; holderOf tells whether a pod the job does
// not control holds the name of the worker of an index. The workers' pods
// are not changed.
func PlanWorkers(spec Spec, workers []Worker, nextIndex int, holderOf func(index int) Holder, now time.Time) Plan {
	var plan Plan
	if spec.Elastic {
		plan.NextIndex = unusedIndex(workers, nextIndex)
		plan.Create, plan.Drain = resizeElastic(workers, spec.Replicas, plan.NextIndex, holderOf)
	} else {
		plan.resizeFixed(spec, workers, holderOf)
	}
	plan.bound(spec, workers)
	plan.place(spec, workers, now)
	if spec.Elastic {
		plan.Hosts.Desired = mergeByIndex(spec, workers, plan.Hosts.Desired, plan.Create)
	} else {
		// A fixed job's hostfile names its workers 0..replicas-1 whatever
		// state they are in, as the upstream operator did.
		plan.Hosts.Desired = nil
		for i := range spec.Replicas {
			plan.Hosts.Desired = append(plan.Hosts.Desired, spec.WorkerName(i))
		}
	}
	plan.Exec = mergeByIndex(spec, workers, plan.Exec, plan.Create)
	// A name the script still lists keeps its place in the files and the
	// exec rights; its pod waits for the write that unlists the old one.
	plan.Create = slices.DeleteFunc(plan.Create, func(i int) bool { return spec.Listed[spec.WorkerName(i)] })
	return plan
}

// resizeFixed plans a fixed job's creations and removals, and the names in
// its way.
func (p *Plan) resizeFixed(spec Spec, workers []Worker, holderOf func(int) Holder) {
	var held []int
	p.Create, p.Drain, p.Remove, held = resizeFixed(workers, spec.Replicas, holderOf)
	for _, i := range held {
		name := spec.WorkerName(i)
		p.InTheWay = append(p.InTheWay, name)
		if holderOf(i) == NameHeld {
			p.Blocked = append(p.Blocked, name)
		}
	}
}

// bound holds back the creations that would take the job's workers past
// spec.MaxPods.
func (p *Plan) bound(spec Spec, workers []Worker) {
	if spec.MaxPods <= 0 {
		return
	}
	pods := 0
	for _, w := range workers {
		if !w.Terminating() && !w.Finished() {
			pods++
		}
	}
	room := max(spec.MaxPods-pods, 0)
	if len(p.Create) > room {
		p.HeldBack, p.Pods = len(p.Create)-room, pods
		p.Create = slices.Clip(p.Create[:room])
		if room == 0 {
			p.Create = nil
		}
	}
}

// place puts each existing worker where it belongs once p.Drain is chosen:
// removed or waited for if it drains, granted exec if it has not finished,
// and listed if it is live.
func (p *Plan) place(spec Spec, workers []Worker, now time.Time) {
	chosen := make(map[*corev1.Pod]bool, len(p.Drain))
	for _, pod := range p.Drain {
		chosen[pod] = true
	}
	for _, w := range workers {
		switch {
		case w.Terminating():
		case w.Draining():
			if wait := w.DrainingSince.Add(spec.DrainPeriod).Sub(now); wait > 0 {
				p.Requeue = Sooner(p.Requeue, wait)
			} else {
				p.Remove = append(p.Remove, w.Pod)
			}
			p.Exec = append(p.Exec, w.Pod.Name)
		case chosen[w.Pod]:
			p.Requeue = Sooner(p.Requeue, max(spec.DrainPeriod, time.Millisecond))
			p.Exec = append(p.Exec, w.Pod.Name)
		case w.Finished():
		default:
			p.Exec = append(p.Exec, w.Pod.Name)
			p.Hosts.Desired = append(p.Hosts.Desired, w.Pod.Name)
			if w.Running() && spec.listable(w) {
				p.Hosts.Running = append(p.Hosts.Running, w.Pod.Name)
			}
		}
	}
}

// mergeByIndex adds the workers about to be created to names (existing
// workers' names) and returns them all in index order.
func mergeByIndex(spec Spec, workers []Worker, names []string, create []int) []string {
	if len(create) == 0 {
		return names
	}
	index := map[string]int{}
	for _, w := range workers {
		index[w.Pod.Name] = w.Index
	}
	out := slices.Clone(names)
	for _, i := range create {
		name := spec.WorkerName(i)
		index[name] = i
		out = append(out, name)
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Compare(index[a], index[b]) })
	return out
}

// resizeFixed keeps a job without an elastic policy on the workers
// 0..replicas-1, as the upstream operator did: missing ones are created once
// no pod holds their name, those above the range are drained (or, when they
// have finished and so are listed nowhere, deleted at once). held are the
// indices whose names pods of someone else's hold.
func resizeFixed(workers []Worker, replicas int, holderOf func(int) Holder) (create []int, drain, remove []*corev1.Pod, held []int) {
	taken := map[int]bool{}
	for _, w := range workers {
		taken[w.Index] = true
		if w.Index < replicas || w.Terminating() || w.Draining() {
			continue
		}
		if w.Finished() {
			remove = append(remove, w.Pod)
		} else {
			drain = append(drain, w.Pod)
		}
	}
	for i := range replicas {
		if taken[i] {
			continue
		}
		if holderOf(i) == NameFree {
			create = append(create, i)
		} else {
			held = append(held, i)
		}
	}
	return create, drain, remove, held
}

// unusedIndex is the lowest index above every index that the job has used:
// the recorded one, or past the workers that exist, whichever is higher.
func unusedIndex(workers []Worker, recorded int) int {
	next := max(recorded, 0)
	for _, w := range workers {
		next = max(next, w.Index+1)
	}
	return next
}

// resizeElastic keeps replicas live workers. Surplus workers are chosen as
// a ReplicaSet chooses pods to delete: not yet Running first, then the lowest
// pod-deletion-cost, then the highest index. New workers take indices from
// next on, which the job has never used: Horovod blacklists the name of a
// worker that failed, so no name is ever given out twice. An index whose
// name a pod of someone else's holds is passed over.
func resizeElastic(workers []Worker, replicas, next int, holderOf func(int) Holder) (create []int, drain []*corev1.Pod) {
	var live []Worker
	for _, w := range workers {
		if w.Live() {
			live = append(live, w)
		}
	}
	if surplus := len(live) - replicas; surplus > 0 {
		slices.SortStableFunc(live, compareForScaleIn)
		for _, w := range live[:surplus] {
			drain = append(drain, w.Pod)
		}
		return nil, drain
	}
	for i := next; len(create) < replicas-len(live); i++ {
		if holderOf(i) == NameFree {
			create = append(create, i)
		}
	}
	return create, nil
}

// Settled tells whether a job's workers have reached what spec asks for:
// the plan creates, drains and removes nothing, no worker is draining or
// being deleted, and exactly spec.Replicas workers are live, every one of
// them Running and listable. Until then the job is resizing.
func Settled(spec Spec, workers []Worker, plan Plan) bool {
	if len(plan.Create) > 0 || len(plan.Drain) > 0 || len(plan.Remove) > 0 {
		return false
	}
	live := 0
	for _, w := range workers {
		switch {
		case w.Draining(), w.Terminating():
			return false
		case w.Live():
			if !w.Running() || !spec.listable(w) {
				return false
			}
			live++
		}
	}
	return live == spec.Replicas
}

// Sooner is the nearer of two waits, where zero or less means no wait: the
// way to combine Plan.Requeue with the caller's other deadlines.
func Sooner(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	default:
		return min(a, b)
	}
}
