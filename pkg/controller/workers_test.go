package controller

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
)

// workersTestNow is the fixed "now" of every planning test.
var workersTestNow = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// workersTestJob returns a defaulted job "ns/job" with replicas workers,
// elastic when ep is not nil.
func workersTestJob(replicas int32, ep *kubeflow.ElasticPolicy) *kubeflow.MPIJob {
	job := &kubeflow.MPIJob{
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns", UID: "job-uid"},
		Spec: kubeflow.MPIJobSpec{
			MPIReplicaSpecs: map[common.ReplicaType]*common.ReplicaSpec{
				kubeflow.MPIReplicaTypeLauncher: {Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "l"}}}}},
				kubeflow.MPIReplicaTypeWorker: {
					Replicas: ptr(replicas),
					Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "w"}}}},
				},
			},
			ElasticPolicy: ep,
		},
	}
	kubeflow.SetDefaults_MPIJob(job)
	return job
}

// wtPod is a worker pod of workersTestJob with the given index and phase.
func wtPod(index int, phase corev1.PodPhase, opts ...func(*corev1.Pod)) *corev1.Pod {
	name := "job-worker-" + strconv.Itoa(index)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: "ns",
			UID:       types.UID(name + "-uid"),
			Labels: map[string]string{
				"group-name":    "kubeflow.org",
				"mpi-job-name":  "job",
				"mpi-job-role":  "worker",
				"replica-index": strconv.Itoa(index),
			},
		},
		Status: corev1.PodStatus{Phase: phase},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func wtAnnotate(key, value string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[key] = value
	}
}

// wtDrainingFor marks a pod draining since d before workersTestNow.
func wtDrainingFor(d time.Duration) func(*corev1.Pod) {
	return wtAnnotate(annotationDrainingSince, workersTestNow.Add(-d).Format(time.RFC3339))
}

func wtCost(c int) func(*corev1.Pod) { return wtAnnotate(annotationDeletionCost, strconv.Itoa(c)) }

func wtTerminating(p *corev1.Pod) {
	ts := metav1.NewTime(workersTestNow.Add(-time.Second))
	p.DeletionTimestamp = &ts
}

// wtNames are the names of workersTestJob's workers with these indices.
func wtNames(indices ...int) []string {
	out := make([]string, 0, len(indices))
	for _, i := range indices {
		out = append(out, "job-worker-"+strconv.Itoa(i))
	}
	return out
}

// wtPlan is a workerPlan by pod names, for comparison.
type wtPlan struct {
	Create  []int
	Drain   []string
	Remove  []string
	Desired []string
	Running []string
	Exec    []string
	Requeue time.Duration
}

func wtSummarize(p workerPlan) wtPlan {
	names := func(pods []*corev1.Pod) []string {
		var out []string
		for _, pod := range pods {
			out = append(out, pod.Name)
		}
		return out
	}
	return wtPlan{
		Create:  p.create,
		Drain:   names(p.drain),
		Remove:  names(p.remove),
		Desired: p.hosts.desired,
		Running: p.hosts.running,
		Exec:    p.exec,
		Requeue: p.requeue,
	}
}

// wtCheckInvariants asserts what must hold for every plan.
func wtCheckInvariants(t *testing.T, job *kubeflow.MPIJob, pods []*corev1.Pod, plan workerPlan) {
	t.Helper()
	running := map[string]bool{}
	for _, n := range plan.hosts.running {
		running[n] = true
	}
	// The key invariant: a worker is never deleted while the discovery
	// script lists it, nor chosen for draining while listed.
	for _, p := range plan.remove {
		if running[p.Name] {
			t.Errorf("INVARIANT: %s is removed but listed in hosts.running %v", p.Name, plan.hosts.running)
		}
	}
	for _, p := range plan.drain {
		if running[p.Name] {
			t.Errorf("INVARIANT: %s is drained but listed in hosts.running %v", p.Name, plan.hosts.running)
		}
		if slices.Contains(plan.remove, p) {
			t.Errorf("INVARIANT: %s is both drained and removed", p.Name)
		}
	}
	// Every host the launcher may use is one it may exec into.
	exec := map[string]bool{}
	for _, n := range plan.exec {
		exec[n] = true
	}
	for _, n := range plan.hosts.running {
		if !exec[n] {
			t.Errorf("INVARIANT: %s is in hosts.running but not in exec %v", n, plan.exec)
		}
	}
	for _, n := range plan.hosts.running {
		if !slices.Contains(plan.hosts.desired, n) {
			t.Errorf("INVARIANT: %s is in hosts.running but not in hosts.desired %v", n, plan.hosts.desired)
		}
	}
	// hosts.running is in strictly increasing numeric index order.
	prev := -1
	for _, n := range plan.hosts.running {
		i, err := strconv.Atoi(n[len("job-worker-"):])
		if err != nil || i <= prev {
			t.Errorf("INVARIANT: hosts.running %v is not in numeric index order", plan.hosts.running)
			break
		}
		prev = i
	}
	// New workers take names no pod holds, and are exec targets already.
	held := map[int]bool{}
	for _, p := range pods {
		if i, ok := workerIndex(job, p); ok {
			held[i] = true
		}
	}
	for _, i := range plan.create {
		if held[i] {
			t.Errorf("INVARIANT: creating index %d, which a pod holds", i)
		}
		if !exec[workerName(job, i)] {
			t.Errorf("INVARIANT: new worker %d is not in exec %v", i, plan.exec)
		}
	}
	if !slices.IsSorted(plan.create) {
		t.Errorf("INVARIANT: create %v is not ascending", plan.create)
	}
	// Finished and terminating pods are nobody's host.
	for _, p := range pods {
		finished := p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
		if finished || p.DeletionTimestamp != nil {
			if exec[p.Name] || running[p.Name] {
				t.Errorf("INVARIANT: finished or terminating %s is in exec %v or running %v", p.Name, plan.exec, plan.hosts.running)
			}
		}
	}
	if plan.requeue < 0 {
		t.Errorf("INVARIANT: negative requeue %v", plan.requeue)
	}
}

func TestPlanWorkers(t *testing.T) {
	elastic := func(minR, maxR, drain int32) *kubeflow.ElasticPolicy {
		ep := &kubeflow.ElasticPolicy{MinReplicas: ptr(minR), DrainSeconds: ptr(drain)}
		if maxR > 0 {
			ep.MaxReplicas = ptr(maxR)
		}
		return ep
	}
	const fixedDrain = 30 * time.Second // kubeflow.DefaultDrainSeconds
	cases := []struct {
		name     string
		replicas int32
		elastic  *kubeflow.ElasticPolicy
		pods     []*corev1.Pod
		want     wtPlan
	}{
		// Fixed jobs.
		{
			name:     "fixed: first sync creates 0..n-1",
			replicas: 3,
			want: wtPlan{
				Create:  []int{0, 1, 2},
				Desired: wtNames(0, 1, 2),
				Exec:    wtNames(0, 1, 2),
			},
		},
		{
			name:     "fixed: steady state, all running",
			replicas: 3,
			pods:     []*corev1.Pod{wtPod(0, corev1.PodRunning), wtPod(1, corev1.PodRunning), wtPod(2, corev1.PodRunning)},
			want: wtPlan{
				Desired: wtNames(0, 1, 2),
				Running: wtNames(0, 1, 2),
				Exec:    wtNames(0, 1, 2),
			},
		},
		{
			name:     "fixed: missing indices are created, pending ones are not running hosts",
			replicas: 4,
			pods:     []*corev1.Pod{wtPod(0, corev1.PodRunning), wtPod(2, corev1.PodPending)},
			want: wtPlan{
				Create:  []int{1, 3},
				Desired: wtNames(0, 1, 2, 3),
				Running: wtNames(0),
				Exec:    wtNames(0, 1, 2, 3),
			},
		},
		{
			name:     "fixed: growth adds the indices above the old range",
			replicas: 4,
			pods:     []*corev1.Pod{wtPod(0, corev1.PodRunning), wtPod(1, corev1.PodRunning)},
			want: wtPlan{
				Create:  []int{2, 3},
				Desired: wtNames(0, 1, 2, 3),
				Running: wtNames(0, 1),
				Exec:    wtNames(0, 1, 2, 3),
			},
		},
		{
			name:     "fixed: shrink drains index >= replicas instead of deleting",
			replicas: 2,
			pods:     []*corev1.Pod{wtPod(0, corev1.PodRunning), wtPod(1, corev1.PodRunning), wtPod(2, corev1.PodRunning), wtPod(3, corev1.PodPending)},
			want: wtPlan{
				Drain:   wtNames(2, 3),
				Desired: wtNames(0, 1),
				Running: wtNames(0, 1),
				Exec:    wtNames(0, 1, 2, 3),
				Requeue: fixedDrain,
			},
		},
		{
			name:     "fixed: finished workers above the range are removed at once, live ones drained",
			replicas: 2,
			pods: []*corev1.Pod{
				wtPod(0, corev1.PodRunning), wtPod(1, corev1.PodRunning),
				wtPod(2, corev1.PodSucceeded), wtPod(3, corev1.PodFailed), wtPod(4, corev1.PodRunning),
			},
			want: wtPlan{
				Drain:   wtNames(4),
				Remove:  wtNames(2, 3),
				Desired: wtNames(0, 1),
				Running: wtNames(0, 1),
				Exec:    wtNames(0, 1, 4),
				Requeue: fixedDrain,
			},
		},
		{
			name:     "fixed: drain elapsed is removed, drain not elapsed requeues for the remainder",
			replicas: 2,
			pods: []*corev1.Pod{
				wtPod(0, corev1.PodRunning), wtPod(1, corev1.PodRunning),
				wtPod(2, corev1.PodRunning, wtDrainingFor(31*time.Second)),
				wtPod(3, corev1.PodRunning, wtDrainingFor(10*time.Second)),
			},
			want: wtPlan{
				Remove:  wtNames(2),
				Desired: wtNames(0, 1),
				Running: wtNames(0, 1),
				Exec:    wtNames(0, 1, 2, 3),
				Requeue: 20 * time.Second,
			},
		},
		{
			name:     "fixed: drain of exactly the period is elapsed",
			replicas: 1,
			pods:     []*corev1.Pod{wtPod(0, corev1.PodRunning), wtPod(1, corev1.PodRunning, wtDrainingFor(fixedDrain))},
			want: wtPlan{
				Remove:  wtNames(1),
				Desired: wtNames(0),
				Running: wtNames(0),
				Exec:    wtNames(0, 1),
			},
		},
		{
			name:     "fixed: an unreadable draining-since counts as long elapsed",
			replicas: 1,
			pods:     []*corev1.Pod{wtPod(0, corev1.PodRunning), wtPod(1, corev1.PodRunning, wtAnnotate(annotationDrainingSince, "yesterday"))},
			want: wtPlan{
				Remove:  wtNames(1),
				Desired: wtNames(0),
				Running: wtNames(0),
				Exec:    wtNames(0, 1),
			},
		},
		{
			name:     "fixed: several drains requeue for the nearest",
			replicas: 1,
			pods: []*corev1.Pod{
				wtPod(0, corev1.PodRunning),
				wtPod(1, corev1.PodRunning, wtDrainingFor(5*time.Second)),
				wtPod(2, corev1.PodRunning, wtDrainingFor(25*time.Second)),
				wtPod(3, corev1.PodRunning),
			},
			want: wtPlan{
				Drain:   wtNames(3),
				Desired: wtNames(0),
				Running: wtNames(0),
				Exec:    wtNames(0, 1, 2, 3),
				Requeue: 5 * time.Second,
			},
		},
		{
			name:     "fixed: growing back while a worker drains does not recreate its index",
			replicas: 3,
			pods: []*corev1.Pod{
				wtPod(0, corev1.PodRunning), wtPod(1, corev1.PodRunning),
				wtPod(2, corev1.PodRunning, wtDrainingFor(10*time.Second)),
			},
			want: wtPlan{
				Desired: wtNames(0, 1, 2),
				Running: wtNames(0, 1),
				Exec:    wtNames(0, 1, 2),
				Requeue: 20 * time.Second,
			},
		},
		{
			name:     "fixed: a terminating worker in range is waited for, not recreated or listed",
			replicas: 2,
			pods:     []*corev1.Pod{wtPod(0, corev1.PodRunning, wtTerminating), wtPod(1, corev1.PodRunning)},
			want: wtPlan{
				Desired: wtNames(0, 1),
				Running: wtNames(1),
				Exec:    wtNames(1),
			},
		},
		{
			name:     "fixed: a terminating worker above range is neither drained nor removed again",
			replicas: 1,
			pods:     []*corev1.Pod{wtPod(0, corev1.PodRunning), wtPod(1, corev1.PodRunning, wtTerminating, wtDrainingFor(time.Hour))},
			want: wtPlan{
				Desired: wtNames(0),
				Running: wtNames(0),
				Exec:    wtNames(0),
			},
		},
		{
			name:     "fixed: a failed worker in range keeps its index and leaves the lists",
			replicas: 2,
			pods:     []*corev1.Pod{wtPod(0, corev1.PodFailed), wtPod(1, corev1.PodRunning)},
			want: wtPlan{
				Desired: wtNames(0, 1),
				Running: wtNames(1),
				Exec:    wtNames(1),
			},
		},
		{
			name:     "fixed: zero replicas and no pods: nothing, and no exec target",
			replicas: 0,
		},
		{
			name:     "fixed: zero replicas drains every live worker",
			replicas: 0,
			pods:     []*corev1.Pod{wtPod(0, corev1.PodRunning), wtPod(1, corev1.PodPending)},
			want: wtPlan{
				Drain:   wtNames(0, 1),
				Exec:    wtNames(0, 1),
				Requeue: fixedDrain,
			},
		},
		{
			name:     "fixed: numeric order, worker-2 before worker-10",
			replicas: 11,
			pods: []*corev1.Pod{
				wtPod(10, corev1.PodRunning), wtPod(2, corev1.PodRunning), wtPod(1, corev1.PodRunning),
				wtPod(0, corev1.PodRunning), wtPod(9, corev1.PodRunning),
			},
			want: wtPlan{
				Create:  []int{3, 4, 5, 6, 7, 8},
				Desired: wtNames(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10),
				Running: wtNames(0, 1, 2, 9, 10),
				Exec:    wtNames(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10),
			},
		},

		// Elastic jobs.
		{
			name:     "elastic: first sync creates 0..n-1",
			replicas: 2,
			elastic:  elastic(1, 3, 20),
			want: wtPlan{
				Create:  []int{0, 1},
				Desired: wtNames(0, 1),
				Exec:    wtNames(0, 1),
			},
		},
		{
			name:     "elastic: shrink drains Pending before Running, then the highest index",
			replicas: 2,
			elastic:  elastic(1, 4, 20),
			pods: []*corev1.Pod{
				wtPod(0, corev1.PodRunning), wtPod(1, corev1.PodPending),
				wtPod(2, corev1.PodRunning), wtPod(3, corev1.PodRunning),
			},
			want: wtPlan{
				Drain:   wtNames(1, 3),
				Desired: wtNames(0, 2),
				Running: wtNames(0, 2),
				Exec:    wtNames(0, 1, 2, 3),
				Requeue: 20 * time.Second,
			},
		},
		{
			name:     "elastic: shrink takes the lowest deletion cost before the highest index",
			replicas: 2,
			elastic:  elastic(1, 4, 20),
			pods: []*corev1.Pod{
				wtPod(0, corev1.PodRunning, wtCost(-5)), wtPod(1, corev1.PodRunning),
				wtPod(2, corev1.PodRunning), wtPod(3, corev1.PodRunning, wtCost(100)),
			},
			want: wtPlan{
				Drain:   wtNames(0, 2),
				Desired: wtNames(1, 3),
				Running: wtNames(1, 3),
				Exec:    wtNames(0, 1, 2, 3),
				Requeue: 20 * time.Second,
			},
		},
		{
			name:     "elastic: a Pending worker goes first even with a higher cost",
			replicas: 1,
			elastic:  elastic(1, 4, 20),
			pods:     []*corev1.Pod{wtPod(0, corev1.PodRunning, wtCost(-100)), wtPod(1, corev1.PodPending, wtCost(100))},
			want: wtPlan{
				Drain:   wtNames(1),
				Desired: wtNames(0),
				Running: wtNames(0),
				Exec:    wtNames(0, 1),
				Requeue: 20 * time.Second,
			},
		},
		{
			name:     "elastic: a failed worker is replaced under the lowest index no pod holds",
			replicas: 3,
			elastic:  elastic(1, 4, 20),
			pods:     []*corev1.Pod{wtPod(0, corev1.PodRunning), wtPod(1, corev1.PodFailed), wtPod(2, corev1.PodRunning)},
			want: wtPlan{
				Create:  []int{3},
				Desired: wtNames(0, 2, 3),
				Running: wtNames(0, 2),
				Exec:    wtNames(0, 2, 3),
			},
		},
		{
			name:     "elastic: replacements skip failed, succeeded, terminating and draining indices",
			replicas: 4,
			elastic:  elastic(1, 8, 20),
			pods: []*corev1.Pod{
				wtPod(0, corev1.PodFailed), wtPod(1, corev1.PodRunning, wtTerminating),
				wtPod(2, corev1.PodRunning), wtPod(3, corev1.PodSucceeded),
				wtPod(4, corev1.PodRunning, wtDrainingFor(5*time.Second)),
			},
			want: wtPlan{
				Create:  []int{5, 6, 7},
				Desired: wtNames(2, 5, 6, 7),
				Running: wtNames(2),
				Exec:    wtNames(2, 4, 5, 6, 7),
				Requeue: 15 * time.Second,
			},
		},
		{
			name:     "elastic: a hole left by a deleted worker is never reused",
			replicas: 3,
			elastic:  elastic(1, 4, 20),
			pods:     []*corev1.Pod{wtPod(0, corev1.PodRunning), wtPod(2, corev1.PodRunning)},
			want: wtPlan{
				Create:  []int{3},
				Desired: wtNames(0, 2, 3),
				Running: wtNames(0, 2),
				Exec:    wtNames(0, 2, 3),
			},
		},
		{
			name:     "elastic: drain elapsed is removed without a replacement",
			replicas: 2,
			elastic:  elastic(1, 4, 20),
			pods: []*corev1.Pod{
				wtPod(0, corev1.PodRunning), wtPod(1, corev1.PodRunning),
				wtPod(2, corev1.PodRunning, wtDrainingFor(21*time.Second)),
			},
			want: wtPlan{
				Remove:  wtNames(2),
				Desired: wtNames(0, 1),
				Running: wtNames(0, 1),
				Exec:    wtNames(0, 1, 2),
			},
		},
		{
			name:     "elastic: drainSeconds 0 still requeues, soon",
			replicas: 1,
			elastic:  elastic(1, 4, 0),
			pods:     []*corev1.Pod{wtPod(0, corev1.PodRunning), wtPod(1, corev1.PodRunning)},
			want: wtPlan{
				Drain:   wtNames(1),
				Desired: wtNames(0),
				Running: wtNames(0),
				Exec:    wtNames(0, 1),
				Requeue: time.Millisecond,
			},
		},
		{
			name:     "elastic: drainSeconds 0 removes a marked worker at once",
			replicas: 1,
			elastic:  elastic(1, 4, 0),
			pods:     []*corev1.Pod{wtPod(0, corev1.PodRunning), wtPod(1, corev1.PodRunning, wtDrainingFor(0))},
			want: wtPlan{
				Remove:  wtNames(1),
				Desired: wtNames(0),
				Running: wtNames(0),
				Exec:    wtNames(0, 1),
			},
		},
		{
			name:     "elastic: hostfile lists live workers and new ones in numeric order",
			replicas: 4,
			elastic:  elastic(1, 12, 20),
			pods: []*corev1.Pod{
				wtPod(10, corev1.PodRunning), wtPod(2, corev1.PodPending), wtPod(0, corev1.PodFailed),
			},
			want: wtPlan{
				Create:  []int{11, 12},
				Desired: wtNames(2, 10, 11, 12),
				Running: wtNames(10),
				Exec:    wtNames(2, 10, 11, 12),
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := workersTestJob(tc.replicas, tc.elastic)
			before := make([]*corev1.Pod, len(tc.pods))
			for i, p := range tc.pods {
				before[i] = p.DeepCopy()
			}
			plan := planWorkers(job, toWorkers(job, tc.pods), 0, noHolders, workersTestNow)
			sortNames := cmpopts.SortSlices(func(a, b string) bool { return a < b })
			if diff := cmp.Diff(tc.want, wtSummarize(plan), cmpopts.EquateEmpty(),
				cmp.FilterPath(func(p cmp.Path) bool {
					// Which victims come first is not part of the plan's meaning.
					f := p.Last().String()
					return f == ".Drain" || f == ".Remove"
				}, sortNames)); diff != "" {
				t.Errorf("planWorkers (-want +got):\n%s", diff)
			}
			wtCheckInvariants(t, job, tc.pods, plan)
			if diff := cmp.Diff(before, tc.pods, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("planWorkers changed the pods (-before +after):\n%s", diff)
			}
		})
	}
}

// TestPlanWorkersInvariantsExhaustive plans every combination of states for
// three workers, fixed and elastic, at several sizes, and checks the
// invariants each time.
func TestPlanWorkersInvariantsExhaustive(t *testing.T) {
	type state func(i int) *corev1.Pod
	states := []state{
		nil, // no pod
		func(i int) *corev1.Pod { return wtPod(i, corev1.PodPending) },
		func(i int) *corev1.Pod { return wtPod(i, corev1.PodRunning) },
		func(i int) *corev1.Pod { return wtPod(i, corev1.PodFailed) },
		func(i int) *corev1.Pod { return wtPod(i, corev1.PodSucceeded) },
		func(i int) *corev1.Pod { return wtPod(i, corev1.PodRunning, wtTerminating) },
		func(i int) *corev1.Pod { return wtPod(i, corev1.PodRunning, wtDrainingFor(time.Second)) },
		func(i int) *corev1.Pod { return wtPod(i, corev1.PodRunning, wtDrainingFor(time.Hour)) },
		func(i int) *corev1.Pod { return wtPod(i, corev1.PodPending, wtCost(7)) },
	}
	indices := []int{0, 2, 10}
	for _, ep := range []*kubeflow.ElasticPolicy{nil, {MinReplicas: ptr[int32](1)}} {
		for replicas := int32(0); replicas <= 4; replicas++ {
			job := workersTestJob(replicas, ep)
			for a := range states {
				for b := range states {
					for c := range states {
						var pods []*corev1.Pod
						for k, s := range []int{a, b, c} {
							if states[s] != nil {
								pods = append(pods, states[s](indices[k]))
							}
						}
						plan := planWorkers(job, toWorkers(job, pods), 0, noHolders, workersTestNow)
						wtCheckInvariants(t, job, pods, plan)
						live := 0
						for _, p := range pods {
							w := worker{pod: p}
							if _, ok := p.Annotations[annotationDrainingSince]; ok {
								w.drainingSince = workersTestNow
							}
							if w.live() && !slices.Contains(plan.drain, p) {
								live++
							}
						}
						if ep != nil && live+len(plan.create) != int(replicas) {
							t.Errorf("elastic, replicas %d, states %d/%d/%d: %d live kept + %d created, want %d",
								replicas, a, b, c, live, len(plan.create), replicas)
						}
						if t.Failed() {
							t.Fatalf("stopping after the first failing combination (replicas %d, elastic %v, states %d/%d/%d)",
								replicas, ep != nil, a, b, c)
						}
					}
				}
			}
		}
	}
}

func TestToWorkers(t *testing.T) {
	job := workersTestJob(3, nil)
	since := workersTestNow.Add(-10 * time.Second)
	newLabelOnly := wtPod(4, corev1.PodRunning)
	delete(newLabelOnly.Labels, "replica-index")
	newLabelOnly.Labels[common.ReplicaIndexLabel] = "4"
	noIndex := wtPod(0, corev1.PodRunning)
	noIndex.Name = "stranger"
	delete(noIndex.Labels, "replica-index")
	nameOnly := wtPod(11, corev1.PodRunning)
	delete(nameOnly.Labels, "replica-index")
	pods := []*corev1.Pod{
		wtPod(10, corev1.PodRunning),
		wtPod(2, corev1.PodRunning, wtDrainingFor(10*time.Second)),
		noIndex,
		wtPod(1, corev1.PodPending, wtAnnotate(annotationDrainingSince, "not a time")),
		newLabelOnly,
		nameOnly,
	}
	type got struct {
		Name          string
		Index         int
		DrainingSince time.Time
	}
	var gotList []got
	for _, w := range toWorkers(job, pods) {
		gotList = append(gotList, got{w.pod.Name, w.index, w.drainingSince})
	}
	want := []got{
		{"job-worker-1", 1, time.Unix(0, 0)},
		{"job-worker-2", 2, since},
		{"job-worker-4", 4, time.Time{}},
		{"job-worker-10", 10, time.Time{}},
		{"job-worker-11", 11, time.Time{}},
	}
	if diff := cmp.Diff(want, gotList); diff != "" {
		t.Errorf("toWorkers (-want +got):\n%s", diff)
	}
	if ws := toWorkers(job, nil); len(ws) != 0 {
		t.Errorf("toWorkers(nil) = %v, want empty", ws)
	}
}

func TestWorkerStates(t *testing.T) {
	cases := []struct {
		name                                                 string
		pod                                                  *corev1.Pod
		draining                                             bool
		wantTerminating, wantFinished, wantRunning, wantLive bool
	}{
		{name: "pending", pod: wtPod(0, corev1.PodPending), wantLive: true},
		{name: "running", pod: wtPod(0, corev1.PodRunning), wantRunning: true, wantLive: true},
		{name: "failed", pod: wtPod(0, corev1.PodFailed), wantFinished: true},
		{name: "succeeded", pod: wtPod(0, corev1.PodSucceeded), wantFinished: true},
		{name: "unknown phase", pod: wtPod(0, corev1.PodUnknown), wantLive: true},
		{name: "terminating", pod: wtPod(0, corev1.PodRunning, wtTerminating), wantTerminating: true, wantRunning: true},
		{name: "draining", pod: wtPod(0, corev1.PodRunning), draining: true, wantRunning: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := worker{pod: tc.pod}
			if tc.draining {
				w.drainingSince = workersTestNow
			}
			got := []bool{w.terminating(), w.finished(), w.running(), w.live(), w.draining()}
			want := []bool{tc.wantTerminating, tc.wantFinished, tc.wantRunning, tc.wantLive, tc.draining}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("terminating/finished/running/live/draining (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResizeFixed(t *testing.T) {
	job := workersTestJob(0, nil)
	cases := []struct {
		name       string
		replicas   int
		pods       []*corev1.Pod
		holders    map[int]holder
		wantCreate []int
		wantDrain  []string
		wantRemove []string
		wantHeld   []int
	}{
		{name: "empty", replicas: 2, wantCreate: []int{0, 1}},
		{
			name:     "draining and terminating above range are left alone",
			replicas: 1,
			pods: []*corev1.Pod{
				wtPod(0, corev1.PodRunning),
				wtPod(1, corev1.PodRunning, wtDrainingFor(time.Second)),
				wtPod(2, corev1.PodFailed, wtTerminating),
			},
		},
		{
			name:       "above range: live drained, finished removed",
			replicas:   1,
			pods:       []*corev1.Pod{wtPod(1, corev1.PodPending), wtPod(2, corev1.PodSucceeded), wtPod(3, corev1.PodFailed)},
			wantCreate: []int{0},
			wantDrain:  wtNames(1),
			wantRemove: wtNames(2, 3),
		},
		{
			name:     "in range: nothing is taken away, whatever the state",
			replicas: 3,
			pods:     []*corev1.Pod{wtPod(0, corev1.PodFailed), wtPod(1, corev1.PodSucceeded), wtPod(2, corev1.PodRunning, wtTerminating)},
		},
		{
			name:       "names held by other pods are not created",
			replicas:   4,
			pods:       []*corev1.Pod{wtPod(0, corev1.PodRunning)},
			holders:    map[int]holder{1: nameHeld, 2: nameLeaving, 7: nameHeld},
			wantCreate: []int{3},
			wantHeld:   []int{1, 2},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			create, drain, remove, held := resizeFixed(toWorkers(job, tc.pods), tc.replicas, holdersOf(tc.holders))
			got := []any{create, wtPodNames(drain), wtPodNames(remove), held}
			want := []any{tc.wantCreate, tc.wantDrain, tc.wantRemove, tc.wantHeld}
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("resizeFixed create/drain/remove/held (-want +got):\n%s", diff)
			}
		})
	}
}

// noHolders is the holder function of a namespace with no pod of anyone
// else's.
func noHolders(int) holder { return nameFree }

// holdersOf returns the holder function for the indices in m.
func holdersOf(m map[int]holder) func(int) holder {
	return func(i int) holder { return m[i] }
}

func wtPodNames(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestResizeElastic(t *testing.T) {
	job := workersTestJob(0, &kubeflow.ElasticPolicy{})
	cases := []struct {
		name       string
		replicas   int
		pods       []*corev1.Pod
		holders    map[int]holder
		wantCreate []int
		wantDrain  []string // in the order of choice
	}{
		{name: "empty", replicas: 3, wantCreate: []int{0, 1, 2}},
		{name: "zero of nothing", replicas: 0},
		{
			name:      "zero drains all live",
			replicas:  0,
			pods:      []*corev1.Pod{wtPod(0, corev1.PodRunning), wtPod(1, corev1.PodFailed)},
			wantDrain: wtNames(0),
		},
		{
			name:     "surplus in order: pending, lowest cost, highest index",
			replicas: 1,
			pods: []*corev1.Pod{
				wtPod(0, corev1.PodRunning, wtCost(10)), wtPod(1, corev1.PodRunning),
				wtPod(2, corev1.PodRunning), wtPod(3, corev1.PodPending, wtCost(50)),
				wtPod(4, corev1.PodRunning, wtCost(-1)),
			},
			wantDrain: wtNames(3, 4, 2, 1),
		},
		{
			name:       "replacement never reuses the failed worker's index",
			replicas:   2,
			pods:       []*corev1.Pod{wtPod(0, corev1.PodFailed), wtPod(1, corev1.PodRunning)},
			wantCreate: []int{2},
		},
		{
			name:       "draining workers do not count as live",
			replicas:   2,
			pods:       []*corev1.Pod{wtPod(0, corev1.PodRunning, wtDrainingFor(time.Second)), wtPod(1, corev1.PodRunning)},
			wantCreate: []int{2},
		},
		{
			name:       "names held by other pods are passed over, leaving or not",
			replicas:   4,
			pods:       []*corev1.Pod{wtPod(0, corev1.PodRunning)},
			holders:    map[int]holder{1: nameHeld, 3: nameLeaving},
			wantCreate: []int{2, 4, 5},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			create, drain := resizeElastic(toWorkers(job, tc.pods), tc.replicas, unusedIndex(toWorkers(job, tc.pods), 0), holdersOf(tc.holders))
			got := []any{create, wtPodNames(drain)}
			want := []any{tc.wantCreate, tc.wantDrain}
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("resizeElastic create/drain (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompareForScaleIn(t *testing.T) {
	w := func(i int, phase corev1.PodPhase, opts ...func(*corev1.Pod)) worker {
		return worker{pod: wtPod(i, phase, opts...), index: i}
	}
	cases := []struct {
		name string
		a, b worker
		want int // sign: <0 means a is removed first
	}{
		{"pending before running", w(0, corev1.PodPending), w(5, corev1.PodRunning), -1},
		{"running after pending", w(5, corev1.PodRunning), w(0, corev1.PodPending), 1},
		{"pending before running whatever the cost", w(0, corev1.PodPending, wtCost(1000)), w(1, corev1.PodRunning, wtCost(-1000)), -1},
		{"unknown phase counts as not running", w(0, corev1.PodUnknown), w(1, corev1.PodRunning), -1},
		{"lower cost first", w(0, corev1.PodRunning, wtCost(-1)), w(1, corev1.PodRunning), -1},
		{"higher cost last", w(0, corev1.PodRunning, wtCost(3)), w(1, corev1.PodRunning, wtCost(2)), 1},
		{"equal cost: higher index first", w(10, corev1.PodRunning), w(2, corev1.PodRunning), -1},
		{"equal cost: lower index last", w(2, corev1.PodRunning), w(10, corev1.PodRunning), 1},
		{"both pending: higher index first", w(3, corev1.PodPending), w(1, corev1.PodPending), -1},
		{"invalid cost is 0", w(0, corev1.PodRunning, wtAnnotate(annotationDeletionCost, "lots")), w(1, corev1.PodRunning), 1},
		{"same worker", w(1, corev1.PodRunning), w(1, corev1.PodRunning), 0},
	}
	sign := func(x int) int {
		switch {
		case x < 0:
			return -1
		case x > 0:
			return 1
		}
		return 0
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := sign(compareForScaleIn(tc.a, tc.b)); got != tc.want {
				t.Errorf("compareForScaleIn sign = %d, want %d", got, tc.want)
			}
			if got := sign(compareForScaleIn(tc.b, tc.a)); got != -tc.want {
				t.Errorf("compareForScaleIn reversed sign = %d, want %d", got, -tc.want)
			}
		})
	}
}

func TestDeletionCost(t *testing.T) {
	cases := []struct {
		value *string
		want  int64
	}{
		{nil, 0},
		{ptr("5"), 5},
		{ptr("-3"), -3},
		{ptr(""), 0},
		{ptr("abc"), 0},
		{ptr("1.5"), 0},
		{ptr("2147483647"), 2147483647},
		{ptr("2147483648"), 0}, // outside int32, invalid for a ReplicaSet too
	}
	for _, tc := range cases {
		p := wtPod(0, corev1.PodRunning)
		name := "absent"
		if tc.value != nil {
			wtAnnotate(annotationDeletionCost, *tc.value)(p)
			name = *tc.value
		}
		if got := deletionCost(p); got != tc.want {
			t.Errorf("deletionCost(%s) = %d, want %d", name, got, tc.want)
		}
	}
}

func TestDrainPeriodAndDesiredWorkers(t *testing.T) {
	if got := drainPeriod(workersTestJob(1, nil)); got != 30*time.Second {
		t.Errorf("fixed job drain period %v, want 30s", got)
	}
	if got := drainPeriod(workersTestJob(1, &kubeflow.ElasticPolicy{DrainSeconds: ptr[int32](7)})); got != 7*time.Second {
		t.Errorf("elastic drainSeconds 7: %v, want 7s", got)
	}
	if got := drainPeriod(workersTestJob(1, &kubeflow.ElasticPolicy{})); got != 30*time.Second {
		t.Errorf("elastic default drain period %v, want 30s", got)
	}
	if got := desiredWorkers(workersTestJob(5, nil)); got != 5 {
		t.Errorf("desiredWorkers = %d, want 5", got)
	}
	noWorker := workersTestJob(5, nil)
	delete(noWorker.Spec.MPIReplicaSpecs, kubeflow.MPIReplicaTypeWorker)
	if got := desiredWorkers(noWorker); got != 0 {
		t.Errorf("desiredWorkers without a Worker spec = %d, want 0", got)
	}
}

// TestPlanWorkersRecordedNextIndex: an elastic job's new workers start at the
// recorded index when it is above every existing one, so that a worker
// removed from outside does not give its name to a newcomer.
func TestPlanWorkersRecordedNextIndex(t *testing.T) {
	job := workersTestJob(3, &kubeflow.ElasticPolicy{MinReplicas: ptr[int32](1)})
	kubeflow.SetDefaults_MPIJob(job)
	ws := toWorkers(job, []*corev1.Pod{wtPod(0, corev1.PodRunning), wtPod(1, corev1.PodRunning)})
	plan := planWorkers(job, ws, 7, noHolders, workersTestNow)
	if diff := cmp.Diff([]int{7}, plan.create); diff != "" {
		t.Errorf("create (-want +got):\n%s", diff)
	}
	if plan.nextIndex != 7 {
		t.Errorf("nextIndex = %d, want 7: a worker not created yet does not raise it", plan.nextIndex)
	}
	// Once the worker exists, the index moves past it.
	ws = append(ws, toWorkers(job, []*corev1.Pod{wtPod(7, corev1.PodPending)})...)
	if p := planWorkers(job, ws, 7, noHolders, workersTestNow); p.nextIndex != 8 || len(p.create) != 0 {
		t.Errorf("with worker 7: nextIndex %d create %v, want 8 and none", p.nextIndex, p.create)
	}
	// A fixed job records nothing.
	fixed := workersTestJob(3, nil)
	kubeflow.SetDefaults_MPIJob(fixed)
	if p := planWorkers(fixed, toWorkers(fixed, nil), 7, noHolders, workersTestNow); p.nextIndex != 0 {
		t.Errorf("fixed job nextIndex = %d, want 0", p.nextIndex)
	}
}
