package controller

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
)

// A worker's life: it is created, turns Running and is listed in
// discover_hosts.sh; when chosen for removal it is marked draining, which
// takes it out of the script at once, and it is deleted only once the drain
// period has passed. A worker that fails leaves the script; an elastic job
// replaces it under an index it has never used.

// worker is one worker pod of a job with its parsed index.
type worker struct {
	pod   *corev1.Pod
	index int
	// drainingSince is when the worker was chosen for removal, or zero.
	drainingSince time.Time
}

func (w worker) terminating() bool { return w.pod.DeletionTimestamp != nil }
func (w worker) draining() bool    { return !w.drainingSince.IsZero() }
func (w worker) finished() bool {
	return w.pod.Status.Phase == corev1.PodFailed || w.pod.Status.Phase == corev1.PodSucceeded
}
func (w worker) running() bool { return w.pod.Status.Phase == corev1.PodRunning }

// live workers are the ones the job counts towards its replicas.
func (w worker) live() bool { return !w.terminating() && !w.draining() && !w.finished() }

// workerPlan is what one sync does to a job's workers.
type workerPlan struct {
	// create are the indices of workers to create, in ascending order.
	create []int
	// drain are live workers to mark draining now.
	drain []*corev1.Pod
	// remove are workers to delete now: drained long enough, or finished
	// outside the wanted range. None of them is listed in hosts.running.
	remove []*corev1.Pod
	// hosts are the contents of the hostfile and discover_hosts.sh.
	hosts hostLists
	// exec are the workers the launcher may exec into: every worker that
	// exists and has not finished, and every worker about to be created.
	// No name that a pod of someone else's holds is among them.
	exec []string
	// inTheWay are the names of a fixed job's workers that pods the job
	// does not control hold; blocked are those of them that are not being
	// deleted.
	inTheWay, blocked []string
	// requeue is the wait until the next drained worker may be deleted.
	requeue time.Duration
	// nextIndex is the lowest index above every worker an elastic job has
	// had, recorded on the ConfigMap whenever the hosts change; zero for a
	// fixed job. A worker is listed in discover_hosts.sh, and so can be
	// blacklisted by Horovod, only through a ConfigMap write that records
	// an index above its own. Workers about to be created do not raise it:
	// if their creation fails, the retry gives out the same names.
	nextIndex int
}

// toWorkers parses the job's worker pods, dropping those without an index.
func toWorkers(job *kubeflow.MPIJob, pods []*corev1.Pod) []worker {
	out := make([]worker, 0, len(pods))
	for _, p := range pods {
		i, ok := workerIndex(job, p)
		if !ok {
			continue
		}
		w := worker{pod: p, index: i}
		if v, found := p.Annotations[annotationDrainingSince]; found {
			if t, err := time.Parse(time.RFC3339, v); err == nil {
				w.drainingSince = t
			} else {
				w.drainingSince = time.Unix(0, 0)
			}
		}
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b worker) int { return cmp.Compare(a.index, b.index) })
	return out
}

func drainPeriod(job *kubeflow.MPIJob) time.Duration {
	if ep := job.Spec.ElasticPolicy; ep != nil && ep.DrainSeconds != nil {
		return time.Duration(*ep.DrainSeconds) * time.Second
	}
	return time.Duration(kubeflow.DefaultDrainSeconds) * time.Second
}

func desiredWorkers(job *kubeflow.MPIJob) int {
	if spec := job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker]; spec != nil && spec.Replicas != nil {
		return int(*spec.Replicas)
	}
	return 0
}

// planWorkers decides the next step for a job's workers (sorted by index).
// nextIndex is the lowest index the job has never used, as last recorded;
// holderOf tells whether a pod the job does not control holds the name of
// the worker of an index.
func planWorkers(job *kubeflow.MPIJob, workers []worker, nextIndex int, holderOf func(int) holder, now time.Time) workerPlan {
	var plan workerPlan
	if job.Spec.ElasticPolicy != nil {
		plan.nextIndex = unusedIndex(workers, nextIndex)
		plan.create, plan.drain = resizeElastic(workers, desiredWorkers(job), plan.nextIndex, holderOf)
	} else {
		var held []int
		plan.create, plan.drain, plan.remove, held = resizeFixed(workers, desiredWorkers(job), holderOf)
		for _, i := range held {
			name := workerName(job, i)
			plan.inTheWay = append(plan.inTheWay, name)
			if holderOf(i) == nameHeld {
				plan.blocked = append(plan.blocked, name)
			}
		}
	}
	chosen := make(map[*corev1.Pod]bool, len(plan.drain))
	for _, p := range plan.drain {
		chosen[p] = true
	}
	period := drainPeriod(job)
	for _, w := range workers {
		switch {
		case w.terminating():
		case w.draining():
			if wait := w.drainingSince.Add(period).Sub(now); wait > 0 {
				plan.requeue = minPositive(plan.requeue, wait)
			} else {
				plan.remove = append(plan.remove, w.pod)
			}
			plan.exec = append(plan.exec, w.pod.Name)
		case chosen[w.pod]:
			plan.requeue = minPositive(plan.requeue, max(period, time.Millisecond))
			plan.exec = append(plan.exec, w.pod.Name)
		case w.finished():
		default:
			plan.exec = append(plan.exec, w.pod.Name)
			plan.hosts.desired = append(plan.hosts.desired, w.pod.Name)
			if w.running() {
				plan.hosts.running = append(plan.hosts.running, w.pod.Name)
			}
		}
	}
	if job.Spec.ElasticPolicy == nil {
		// A fixed job's hostfile names its workers 0..replicas-1 whatever
		// state they are in, as the upstream operator did.
		plan.hosts.desired = nil
		for i := range desiredWorkers(job) {
			plan.hosts.desired = append(plan.hosts.desired, workerName(job, i))
		}
	} else {
		plan.hosts.desired = mergeByIndex(job, workers, plan.hosts.desired, plan.create)
	}
	plan.exec = mergeByIndex(job, workers, plan.exec, plan.create)
	return plan
}

// mergeByIndex adds the workers about to be created to names (existing
// workers' names) and returns them all in index order.
func mergeByIndex(job *kubeflow.MPIJob, workers []worker, names []string, create []int) []string {
	if len(create) == 0 {
		return names
	}
	index := map[string]int{}
	for _, w := range workers {
		index[w.pod.Name] = w.index
	}
	out := slices.Clone(names)
	for _, i := range create {
		name := workerName(job, i)
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
func resizeFixed(workers []worker, replicas int, holderOf func(int) holder) (create []int, drain, remove []*corev1.Pod, held []int) {
	taken := map[int]bool{}
	for _, w := range workers {
		taken[w.index] = true
		if w.index < replicas || w.terminating() || w.draining() {
			continue
		}
		if w.finished() {
			remove = append(remove, w.pod)
		} else {
			drain = append(drain, w.pod)
		}
	}
	for i := range replicas {
		if taken[i] {
			continue
		}
		if holderOf(i) == nameFree {
			create = append(create, i)
		} else {
			held = append(held, i)
		}
	}
	return create, drain, remove, held
}

// unusedIndex is the lowest index above every index that the job has used:
// the recorded one, or past the workers that exist, whichever is higher.
func unusedIndex(workers []worker, recorded int) int {
	next := max(recorded, 0)
	for _, w := range workers {
		next = max(next, w.index+1)
	}
	return next
}

// resizeElastic keeps replicas live workers. Surplus workers are chosen as
// a ReplicaSet chooses pods to delete: not yet Running first, then the lowest
// pod-deletion-cost, then the highest index. New workers take indices from
// next on, which the job has never used: Horovod blacklists the name of a
// worker that failed, so no name is ever given out twice. An index whose
// name a pod of someone else's holds is passed over.
func resizeElastic(workers []worker, replicas, next int, holderOf func(int) holder) (create []int, drain []*corev1.Pod) {
	var live []worker
	for _, w := range workers {
		if w.live() {
			live = append(live, w)
		}
	}
	if surplus := len(live) - replicas; surplus > 0 {
		slices.SortStableFunc(live, compareForScaleIn)
		for _, w := range live[:surplus] {
			drain = append(drain, w.pod)
		}
		return nil, drain
	}
	for i := next; len(create) < replicas-len(live); i++ {
		if holderOf(i) == nameFree {
			create = append(create, i)
		}
	}
	return create, nil
}

// compareForScaleIn orders workers from the first to remove to the last.
func compareForScaleIn(a, b worker) int {
	if ar, br := a.running(), b.running(); ar != br {
		if br {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(deletionCost(a.pod), deletionCost(b.pod)); c != 0 {
		return c
	}
	return cmp.Compare(b.index, a.index)
}

// deletionCost reads the pod-deletion-cost annotation; absent or invalid
// means 0, as for a ReplicaSet.
func deletionCost(pod *corev1.Pod) int64 {
	v, ok := pod.Annotations[annotationDeletionCost]
	if !ok {
		return 0
	}
	cost, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0
	}
	return cost
}
