package elastic

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
)

// planSummary is a Plan by pod names, for comparison.
type planSummary struct {
	Create  []int
	Drain   []string
	Remove  []string
	Desired []string
	Running []string
	Exec    []string
	Requeue time.Duration
}

func summarize(p Plan) planSummary {
	return planSummary{
		Create:  p.Create,
		Drain:   podNames(p.Drain),
		Remove:  podNames(p.Remove),
		Desired: p.Hosts.Desired,
		Running: p.Hosts.Running,
		Exec:    p.Exec,
		Requeue: p.Requeue,
	}
}

// checkInvariants asserts what must hold for every plan.
func checkInvariants(t *testing.T, pods []*corev1.Pod, plan Plan) {
	t.Helper()
	running := map[string]bool{}
	for _, n := range plan.Hosts.Running {
		running[n] = true
	}
	// The key invariant: a worker is never deleted while the discovery
	// script lists it, nor chosen for draining while listed.
	for _, p := range plan.Remove {
		if running[p.Name] {
			t.Errorf("INVARIANT: %s is removed but listed in hosts.running %v", p.Name, plan.Hosts.Running)
		}
	}
	for _, p := range plan.Drain {
		if running[p.Name] {
			t.Errorf("INVARIANT: %s is drained but listed in hosts.running %v", p.Name, plan.Hosts.Running)
		}
		if slices.Contains(plan.Remove, p) {
			t.Errorf("INVARIANT: %s is both drained and removed", p.Name)
		}
	}
	// Every host the launcher may use is one it may exec into.
	exec := map[string]bool{}
	for _, n := range plan.Exec {
		exec[n] = true
	}
	for _, n := range plan.Hosts.Running {
		if !exec[n] {
			t.Errorf("INVARIANT: %s is in hosts.running but not in exec %v", n, plan.Exec)
		}
	}
	for _, n := range plan.Hosts.Running {
		if !slices.Contains(plan.Hosts.Desired, n) {
			t.Errorf("INVARIANT: %s is in hosts.running but not in hosts.desired %v", n, plan.Hosts.Desired)
		}
	}
	// hosts.running is in strictly increasing numeric index order.
	prev := -1
	for _, n := range plan.Hosts.Running {
		i, err := strconv.Atoi(n[len("job-worker-"):])
		if err != nil || i <= prev {
			t.Errorf("INVARIANT: hosts.running %v is not in numeric index order", plan.Hosts.Running)
			break
		}
		prev = i
	}
	// New workers take names no pod holds, and are exec targets already.
	held := map[int]bool{}
	for _, p := range pods {
		if i, ok := testIndex(p); ok {
			held[i] = true
		}
	}
	for _, i := range plan.Create {
		if held[i] {
			t.Errorf("INVARIANT: creating index %d, which a pod holds", i)
		}
		if !exec[testWorkerName(i)] {
			t.Errorf("INVARIANT: new worker %d is not in exec %v", i, plan.Exec)
		}
	}
	if !slices.IsSorted(plan.Create) {
		t.Errorf("INVARIANT: create %v is not ascending", plan.Create)
	}
	// Finished and terminating pods are nobody's host.
	for _, p := range pods {
		finished := p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
		if finished || p.DeletionTimestamp != nil {
			if exec[p.Name] || running[p.Name] {
				t.Errorf("INVARIANT: finished or terminating %s is in exec %v or running %v", p.Name, plan.Exec, plan.Hosts.Running)
			}
		}
	}
	if plan.Requeue < 0 {
		t.Errorf("INVARIANT: negative requeue %v", plan.Requeue)
	}
}

// checkUnlisted plans pods again with a Listable that refuses worker 2 and
// checks that the plan differs from the one without only in leaving worker
// 2 out of Hosts.Running.
func checkUnlisted(t *testing.T, spec Spec, pods []*corev1.Pod, plan Plan) {
	t.Helper()
	spec.Listable = func(w Worker) bool { return w.Index != 2 }
	got := PlanWorkers(spec, workers(pods...), 0, noHolders, testNow)
	checkInvariants(t, pods, got)
	want := plan
	want.Hosts.Running = slices.DeleteFunc(slices.Clone(plan.Hosts.Running), func(n string) bool { return n == testWorkerName(2) })
	if diff := cmp.Diff(summarize(want), summarize(got), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("with worker 2 not listable (-want +got):\n%s", diff)
	}
}

func TestPlanWorkers(t *testing.T) {
	cases := []struct {
		name string
		spec Spec
		pods []*corev1.Pod
		want planSummary
	}{
		// Fixed jobs.
		{
			name: "fixed: first sync creates 0..n-1",
			spec: fixedSpec(3),
			want: planSummary{
				Create:  []int{0, 1, 2},
				Desired: names(0, 1, 2),
				Exec:    names(0, 1, 2),
			},
		},
		{
			name: "fixed: steady state, all running",
			spec: fixedSpec(3),
			pods: []*corev1.Pod{testPod(0, corev1.PodRunning), testPod(1, corev1.PodRunning), testPod(2, corev1.PodRunning)},
			want: planSummary{
				Desired: names(0, 1, 2),
				Running: names(0, 1, 2),
				Exec:    names(0, 1, 2),
			},
		},
		{
			name: "fixed: missing indices are created, pending ones are not running hosts",
			spec: fixedSpec(4),
			pods: []*corev1.Pod{testPod(0, corev1.PodRunning), testPod(2, corev1.PodPending)},
			want: planSummary{
				Create:  []int{1, 3},
				Desired: names(0, 1, 2, 3),
				Running: names(0),
				Exec:    names(0, 1, 2, 3),
			},
		},
		{
			name: "fixed: growth adds the indices above the old range",
			spec: fixedSpec(4),
			pods: []*corev1.Pod{testPod(0, corev1.PodRunning), testPod(1, corev1.PodRunning)},
			want: planSummary{
				Create:  []int{2, 3},
				Desired: names(0, 1, 2, 3),
				Running: names(0, 1),
				Exec:    names(0, 1, 2, 3),
			},
		},
		{
			name: "fixed: shrink drains index >= replicas instead of deleting",
			spec: fixedSpec(2),
			pods: []*corev1.Pod{testPod(0, corev1.PodRunning), testPod(1, corev1.PodRunning), testPod(2, corev1.PodRunning), testPod(3, corev1.PodPending)},
			want: planSummary{
				Drain:   names(2, 3),
				Desired: names(0, 1),
				Running: names(0, 1),
				Exec:    names(0, 1, 2, 3),
				Requeue: defaultDrain,
			},
		},
		{
			name: "fixed: finished workers above the range are removed at once, live ones drained",
			spec: fixedSpec(2),
			pods: []*corev1.Pod{
				testPod(0, corev1.PodRunning), testPod(1, corev1.PodRunning),
				testPod(2, corev1.PodSucceeded), testPod(3, corev1.PodFailed), testPod(4, corev1.PodRunning),
			},
			want: planSummary{
				Drain:   names(4),
				Remove:  names(2, 3),
				Desired: names(0, 1),
				Running: names(0, 1),
				Exec:    names(0, 1, 4),
				Requeue: defaultDrain,
			},
		},
		{
			name: "fixed: drain elapsed is removed, drain not elapsed requeues for the remainder",
			spec: fixedSpec(2),
			pods: []*corev1.Pod{
				testPod(0, corev1.PodRunning), testPod(1, corev1.PodRunning),
				testPod(2, corev1.PodRunning, drainingFor(31*time.Second)),
				testPod(3, corev1.PodRunning, drainingFor(10*time.Second)),
			},
			want: planSummary{
				Remove:  names(2),
				Desired: names(0, 1),
				Running: names(0, 1),
				Exec:    names(0, 1, 2, 3),
				Requeue: 20 * time.Second,
			},
		},
		{
			name: "fixed: drain of exactly the period is elapsed",
			spec: fixedSpec(1),
			pods: []*corev1.Pod{testPod(0, corev1.PodRunning), testPod(1, corev1.PodRunning, drainingFor(defaultDrain))},
			want: planSummary{
				Remove:  names(1),
				Desired: names(0),
				Running: names(0),
				Exec:    names(0, 1),
			},
		},
		{
			name: "fixed: an unreadable draining-since counts as long elapsed",
			spec: fixedSpec(1),
			pods: []*corev1.Pod{testPod(0, corev1.PodRunning), testPod(1, corev1.PodRunning, annotate(AnnotationDrainingSince, "yesterday"))},
			want: planSummary{
				Remove:  names(1),
				Desired: names(0),
				Running: names(0),
				Exec:    names(0, 1),
			},
		},
		{
			name: "fixed: several drains requeue for the nearest",
			spec: fixedSpec(1),
			pods: []*corev1.Pod{
				testPod(0, corev1.PodRunning),
				testPod(1, corev1.PodRunning, drainingFor(5*time.Second)),
				testPod(2, corev1.PodRunning, drainingFor(25*time.Second)),
				testPod(3, corev1.PodRunning),
			},
			want: planSummary{
				Drain:   names(3),
				Desired: names(0),
				Running: names(0),
				Exec:    names(0, 1, 2, 3),
				Requeue: 5 * time.Second,
			},
		},
		{
			name: "fixed: growing back while a worker drains does not recreate its index",
			spec: fixedSpec(3),
			pods: []*corev1.Pod{
				testPod(0, corev1.PodRunning), testPod(1, corev1.PodRunning),
				testPod(2, corev1.PodRunning, drainingFor(10*time.Second)),
			},
			want: planSummary{
				Desired: names(0, 1, 2),
				Running: names(0, 1),
				Exec:    names(0, 1, 2),
				Requeue: 20 * time.Second,
			},
		},
		{
			name: "fixed: a terminating worker in range is waited for, not recreated or listed",
			spec: fixedSpec(2),
			pods: []*corev1.Pod{testPod(0, corev1.PodRunning, terminating), testPod(1, corev1.PodRunning)},
			want: planSummary{
				Desired: names(0, 1),
				Running: names(1),
				Exec:    names(1),
			},
		},
		{
			name: "fixed: a terminating worker above range is neither drained nor removed again",
			spec: fixedSpec(1),
			pods: []*corev1.Pod{testPod(0, corev1.PodRunning), testPod(1, corev1.PodRunning, terminating, drainingFor(time.Hour))},
			want: planSummary{
				Desired: names(0),
				Running: names(0),
				Exec:    names(0),
			},
		},
		{
			name: "fixed: a failed worker in range keeps its index and leaves the lists",
			spec: fixedSpec(2),
			pods: []*corev1.Pod{testPod(0, corev1.PodFailed), testPod(1, corev1.PodRunning)},
			want: planSummary{
				Desired: names(0, 1),
				Running: names(1),
				Exec:    names(1),
			},
		},
		{
			name: "fixed: zero replicas and no pods: nothing, and no exec target",
			spec: fixedSpec(0),
		},
		{
			name: "fixed: zero replicas drains every live worker",
			spec: fixedSpec(0),
			pods: []*corev1.Pod{testPod(0, corev1.PodRunning), testPod(1, corev1.PodPending)},
			want: planSummary{
				Drain:   names(0, 1),
				Exec:    names(0, 1),
				Requeue: defaultDrain,
			},
		},
		{
			name: "fixed: numeric order, worker-2 before worker-10",
			spec: fixedSpec(11),
			pods: []*corev1.Pod{
				testPod(10, corev1.PodRunning), testPod(2, corev1.PodRunning), testPod(1, corev1.PodRunning),
				testPod(0, corev1.PodRunning), testPod(9, corev1.PodRunning),
			},
			want: planSummary{
				Create:  []int{3, 4, 5, 6, 7, 8},
				Desired: names(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10),
				Running: names(0, 1, 2, 9, 10),
				Exec:    names(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10),
			},
		},

		// Elastic jobs.
		{
			name: "elastic: first sync creates 0..n-1",
			spec: elasticSpec(2, 20*time.Second),
			want: planSummary{
				Create:  []int{0, 1},
				Desired: names(0, 1),
				Exec:    names(0, 1),
			},
		},
		{
			name: "elastic: shrink drains Pending before Running, then the highest index",
			spec: elasticSpec(2, 20*time.Second),
			pods: []*corev1.Pod{
				testPod(0, corev1.PodRunning), testPod(1, corev1.PodPending),
				testPod(2, corev1.PodRunning), testPod(3, corev1.PodRunning),
			},
			want: planSummary{
				Drain:   names(1, 3),
				Desired: names(0, 2),
				Running: names(0, 2),
				Exec:    names(0, 1, 2, 3),
				Requeue: 20 * time.Second,
			},
		},
		{
			name: "elastic: shrink takes the lowest deletion cost before the highest index",
			spec: elasticSpec(2, 20*time.Second),
			pods: []*corev1.Pod{
				testPod(0, corev1.PodRunning, withCost(-5)), testPod(1, corev1.PodRunning),
				testPod(2, corev1.PodRunning), testPod(3, corev1.PodRunning, withCost(100)),
			},
			want: planSummary{
				Drain:   names(0, 2),
				Desired: names(1, 3),
				Running: names(1, 3),
				Exec:    names(0, 1, 2, 3),
				Requeue: 20 * time.Second,
			},
		},
		{
			name: "elastic: a Pending worker goes first even with a higher cost",
			spec: elasticSpec(1, 20*time.Second),
			pods: []*corev1.Pod{testPod(0, corev1.PodRunning, withCost(-100)), testPod(1, corev1.PodPending, withCost(100))},
			want: planSummary{
				Drain:   names(1),
				Desired: names(0),
				Running: names(0),
				Exec:    names(0, 1),
				Requeue: 20 * time.Second,
			},
		},
		{
			name: "elastic: a failed worker is replaced under the lowest index no pod holds",
			spec: elasticSpec(3, 20*time.Second),
			pods: []*corev1.Pod{testPod(0, corev1.PodRunning), testPod(1, corev1.PodFailed), testPod(2, corev1.PodRunning)},
			want: planSummary{
				Create:  []int{3},
				Desired: names(0, 2, 3),
				Running: names(0, 2),
				Exec:    names(0, 2, 3),
			},
		},
		{
			name: "elastic: replacements skip failed, succeeded, terminating and draining indices",
			spec: elasticSpec(4, 20*time.Second),
			pods: []*corev1.Pod{
				testPod(0, corev1.PodFailed), testPod(1, corev1.PodRunning, terminating),
				testPod(2, corev1.PodRunning), testPod(3, corev1.PodSucceeded),
				testPod(4, corev1.PodRunning, drainingFor(5*time.Second)),
			},
			want: planSummary{
				Create:  []int{5, 6, 7},
				Desired: names(2, 5, 6, 7),
				Running: names(2),
				Exec:    names(2, 4, 5, 6, 7),
				Requeue: 15 * time.Second,
			},
		},
		{
			name: "elastic: a hole left by a deleted worker is never reused",
			spec: elasticSpec(3, 20*time.Second),
			pods: []*corev1.Pod{testPod(0, corev1.PodRunning), testPod(2, corev1.PodRunning)},
			want: planSummary{
				Create:  []int{3},
				Desired: names(0, 2, 3),
				Running: names(0, 2),
				Exec:    names(0, 2, 3),
			},
		},
		{
			name: "elastic: drain elapsed is removed without a replacement",
			spec: elasticSpec(2, 20*time.Second),
			pods: []*corev1.Pod{
				testPod(0, corev1.PodRunning), testPod(1, corev1.PodRunning),
				testPod(2, corev1.PodRunning, drainingFor(21*time.Second)),
			},
			want: planSummary{
				Remove:  names(2),
				Desired: names(0, 1),
				Running: names(0, 1),
				Exec:    names(0, 1, 2),
			},
		},
		{
			name: "elastic: drainSeconds 0 still requeues, soon",
			spec: elasticSpec(1, 0*time.Second),
			pods: []*corev1.Pod{testPod(0, corev1.PodRunning), testPod(1, corev1.PodRunning)},
			want: planSummary{
				Drain:   names(1),
				Desired: names(0),
				Running: names(0),
				Exec:    names(0, 1),
				Requeue: time.Millisecond,
			},
		},
		{
			name: "elastic: drainSeconds 0 removes a marked worker at once",
			spec: elasticSpec(1, 0*time.Second),
			pods: []*corev1.Pod{testPod(0, corev1.PodRunning), testPod(1, corev1.PodRunning, drainingFor(0))},
			want: planSummary{
				Remove:  names(1),
				Desired: names(0),
				Running: names(0),
				Exec:    names(0, 1),
			},
		},
		{
			name: "elastic: hostfile lists live workers and new ones in numeric order",
			spec: elasticSpec(4, 20*time.Second),
			pods: []*corev1.Pod{
				testPod(10, corev1.PodRunning), testPod(2, corev1.PodPending), testPod(0, corev1.PodFailed),
			},
			want: planSummary{
				Create:  []int{11, 12},
				Desired: names(2, 10, 11, 12),
				Running: names(10),
				Exec:    names(2, 10, 11, 12),
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := make([]*corev1.Pod, len(tc.pods))
			for i, p := range tc.pods {
				before[i] = p.DeepCopy()
			}
			plan := PlanWorkers(tc.spec, workers(tc.pods...), 0, noHolders, testNow)
			sortNames := cmpopts.SortSlices(func(a, b string) bool { return a < b })
			if diff := cmp.Diff(tc.want, summarize(plan), cmpopts.EquateEmpty(),
				cmp.FilterPath(func(p cmp.Path) bool {
					// Which victims come first is not part of the plan's meaning.
					f := p.Last().String()
					return f == ".Drain" || f == ".Remove"
				}, sortNames)); diff != "" {
				t.Errorf("PlanWorkers (-want +got):\n%s", diff)
			}
			checkInvariants(t, tc.pods, plan)
			if diff := cmp.Diff(before, tc.pods, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("PlanWorkers changed the pods (-before +after):\n%s", diff)
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
		func(i int) *corev1.Pod { return testPod(i, corev1.PodPending) },
		func(i int) *corev1.Pod { return testPod(i, corev1.PodRunning) },
		func(i int) *corev1.Pod { return testPod(i, corev1.PodFailed) },
		func(i int) *corev1.Pod { return testPod(i, corev1.PodSucceeded) },
		func(i int) *corev1.Pod { return testPod(i, corev1.PodRunning, terminating) },
		func(i int) *corev1.Pod { return testPod(i, corev1.PodRunning, drainingFor(time.Second)) },
		func(i int) *corev1.Pod { return testPod(i, corev1.PodRunning, drainingFor(time.Hour)) },
		func(i int) *corev1.Pod { return testPod(i, corev1.PodPending, withCost(7)) },
	}
	indices := []int{0, 2, 10}
	for _, el := range []bool{false, true} {
		for replicas := 0; replicas <= 4; replicas++ {
			spec := fixedSpec(replicas)
			spec.Elastic = el
			for a := range states {
				for b := range states {
					for c := range states {
						var pods []*corev1.Pod
						for k, s := range []int{a, b, c} {
							if states[s] != nil {
								pods = append(pods, states[s](indices[k]))
							}
						}
						plan := PlanWorkers(spec, workers(pods...), 0, noHolders, testNow)
						checkInvariants(t, pods, plan)
						checkUnlisted(t, spec, pods, plan)
						live := 0
						for _, p := range pods {
							w := Worker{Pod: p}
							if _, ok := p.Annotations[AnnotationDrainingSince]; ok {
								w.DrainingSince = testNow
							}
							if w.Live() && !slices.Contains(plan.Drain, p) {
								live++
							}
						}
						if el && live+len(plan.Create) != replicas {
							t.Errorf("elastic, replicas %d, states %d/%d/%d: %d live kept + %d created, want %d",
								replicas, a, b, c, live, len(plan.Create), replicas)
						}
						if t.Failed() {
							t.Fatalf("stopping after the first failing combination (replicas %d, elastic %v, states %d/%d/%d)",
								replicas, el, a, b, c)
						}
					}
				}
			}
		}
	}
}

func TestResizeFixed(t *testing.T) {
	cases := []struct {
		name       string
		replicas   int
		pods       []*corev1.Pod
		holders    map[int]Holder
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
				testPod(0, corev1.PodRunning),
				testPod(1, corev1.PodRunning, drainingFor(time.Second)),
				testPod(2, corev1.PodFailed, terminating),
			},
		},
		{
			name:       "above range: live drained, finished removed",
			replicas:   1,
			pods:       []*corev1.Pod{testPod(1, corev1.PodPending), testPod(2, corev1.PodSucceeded), testPod(3, corev1.PodFailed)},
			wantCreate: []int{0},
			wantDrain:  names(1),
			wantRemove: names(2, 3),
		},
		{
			name:     "in range: nothing is taken away, whatever the state",
			replicas: 3,
			pods:     []*corev1.Pod{testPod(0, corev1.PodFailed), testPod(1, corev1.PodSucceeded), testPod(2, corev1.PodRunning, terminating)},
		},
		{
			name:       "names held by other pods are not created",
			replicas:   4,
			pods:       []*corev1.Pod{testPod(0, corev1.PodRunning)},
			holders:    map[int]Holder{1: NameHeld, 2: NameLeaving, 7: NameHeld},
			wantCreate: []int{3},
			wantHeld:   []int{1, 2},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			create, drain, remove, held := resizeFixed(workers(tc.pods...), tc.replicas, holdersOf(tc.holders))
			got := []any{create, podNames(drain), podNames(remove), held}
			want := []any{tc.wantCreate, tc.wantDrain, tc.wantRemove, tc.wantHeld}
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("resizeFixed create/drain/remove/held (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResizeElastic(t *testing.T) {
	cases := []struct {
		name       string
		replicas   int
		pods       []*corev1.Pod
		holders    map[int]Holder
		wantCreate []int
		wantDrain  []string // in the order of choice
	}{
		{name: "empty", replicas: 3, wantCreate: []int{0, 1, 2}},
		{name: "zero of nothing", replicas: 0},
		{
			name:      "zero drains all live",
			replicas:  0,
			pods:      []*corev1.Pod{testPod(0, corev1.PodRunning), testPod(1, corev1.PodFailed)},
			wantDrain: names(0),
		},
		{
			name:     "surplus in order: pending, lowest cost, highest index",
			replicas: 1,
			pods: []*corev1.Pod{
				testPod(0, corev1.PodRunning, withCost(10)), testPod(1, corev1.PodRunning),
				testPod(2, corev1.PodRunning), testPod(3, corev1.PodPending, withCost(50)),
				testPod(4, corev1.PodRunning, withCost(-1)),
			},
			wantDrain: names(3, 4, 2, 1),
		},
		{
			name:       "replacement never reuses the failed worker's index",
			replicas:   2,
			pods:       []*corev1.Pod{testPod(0, corev1.PodFailed), testPod(1, corev1.PodRunning)},
			wantCreate: []int{2},
		},
		{
			name:       "draining workers do not count as live",
			replicas:   2,
			pods:       []*corev1.Pod{testPod(0, corev1.PodRunning, drainingFor(time.Second)), testPod(1, corev1.PodRunning)},
			wantCreate: []int{2},
		},
		{
			name:       "names held by other pods are passed over, leaving or not",
			replicas:   4,
			pods:       []*corev1.Pod{testPod(0, corev1.PodRunning)},
			holders:    map[int]Holder{1: NameHeld, 3: NameLeaving},
			wantCreate: []int{2, 4, 5},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws := workers(tc.pods...)
			create, drain := resizeElastic(ws, tc.replicas, unusedIndex(ws, 0), holdersOf(tc.holders))
			got := []any{create, podNames(drain)}
			want := []any{tc.wantCreate, tc.wantDrain}
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("resizeElastic create/drain (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompareForScaleIn(t *testing.T) {
	w := func(i int, phase corev1.PodPhase, opts ...func(*corev1.Pod)) Worker {
		return Worker{Pod: testPod(i, phase, opts...), Index: i}
	}
	cases := []struct {
		name string
		a, b Worker
		want int // sign: <0 means a is removed first
	}{
		{"pending before running", w(0, corev1.PodPending), w(5, corev1.PodRunning), -1},
		{"running after pending", w(5, corev1.PodRunning), w(0, corev1.PodPending), 1},
		{"pending before running whatever the cost", w(0, corev1.PodPending, withCost(1000)), w(1, corev1.PodRunning, withCost(-1000)), -1},
		{"unknown phase counts as not running", w(0, corev1.PodUnknown), w(1, corev1.PodRunning), -1},
		{"lower cost first", w(0, corev1.PodRunning, withCost(-1)), w(1, corev1.PodRunning), -1},
		{"higher cost last", w(0, corev1.PodRunning, withCost(3)), w(1, corev1.PodRunning, withCost(2)), 1},
		{"equal cost: higher index first", w(10, corev1.PodRunning), w(2, corev1.PodRunning), -1},
		{"equal cost: lower index last", w(2, corev1.PodRunning), w(10, corev1.PodRunning), 1},
		{"both pending: higher index first", w(3, corev1.PodPending), w(1, corev1.PodPending), -1},
		{"invalid cost is 0", w(0, corev1.PodRunning, annotate(AnnotationDeletionCost, "lots")), w(1, corev1.PodRunning), 1},
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
		p := testPod(0, corev1.PodRunning)
		name := "absent"
		if tc.value != nil {
			annotate(AnnotationDeletionCost, *tc.value)(p)
			name = *tc.value
		}
		if got := deletionCost(p); got != tc.want {
			t.Errorf("deletionCost(%s) = %d, want %d", name, got, tc.want)
		}
	}
}

// TestPlanWorkersRecordedNextIndex: an elastic job's new workers start at the
// recorded index when it is above every existing one, so that a worker
// removed from outside does not give its name to a newcomer.
func TestPlanWorkersRecordedNextIndex(t *testing.T) {
	spec := elasticSpec(3, defaultDrain)
	ws := workers(testPod(0, corev1.PodRunning), testPod(1, corev1.PodRunning))
	plan := PlanWorkers(spec, ws, 7, noHolders, testNow)
	if diff := cmp.Diff([]int{7}, plan.Create); diff != "" {
		t.Errorf("create (-want +got):\n%s", diff)
	}
	if plan.NextIndex != 7 {
		t.Errorf("nextIndex = %d, want 7: a worker not created yet does not raise it", plan.NextIndex)
	}
	// Once the worker exists, the index moves past it.
	ws = append(ws, workers(testPod(7, corev1.PodPending))...)
	if p := PlanWorkers(spec, ws, 7, noHolders, testNow); p.NextIndex != 8 || len(p.Create) != 0 {
		t.Errorf("with worker 7: nextIndex %d create %v, want 8 and none", p.NextIndex, p.Create)
	}
	// A fixed job records nothing.
	if p := PlanWorkers(fixedSpec(3), nil, 7, noHolders, testNow); p.NextIndex != 0 {
		t.Errorf("fixed job nextIndex = %d, want 0", p.NextIndex)
	}
}

// TestPlanWorkersListable: a live Running worker that Spec.Listable refuses
// is left out of Hosts.Running only. It still counts towards the replicas,
// keeps its exec rights and its line in the hostfile, and is drained in the
// same order as any Running worker.
func TestPlanWorkersListable(t *testing.T) {
	notOne := func(w Worker) bool { return w.Index != 1 }
	none := func(Worker) bool { return false }
	cases := []struct {
		name     string
		spec     Spec
		listable func(Worker) bool
		pods     []*corev1.Pod
		want     planSummary
	}{
		{
			name:     "elastic: an unlisted worker is not replaced",
			spec:     elasticSpec(3, 20*time.Second),
			listable: notOne,
			pods:     []*corev1.Pod{testPod(0, corev1.PodRunning), testPod(1, corev1.PodRunning), testPod(2, corev1.PodPending)},
			want: planSummary{
				Desired: names(0, 1, 2),
				Running: names(0),
				Exec:    names(0, 1, 2),
			},
		},
		{
			name:     "elastic: scale-in goes by phase, not by listing",
			spec:     elasticSpec(2, 20*time.Second),
			listable: notOne,
			pods:     []*corev1.Pod{testPod(0, corev1.PodRunning), testPod(1, corev1.PodRunning), testPod(2, corev1.PodRunning)},
			want: planSummary{
				Drain:   names(2),
				Desired: names(0, 1),
				Running: names(0),
				Exec:    names(0, 1, 2),
				Requeue: 20 * time.Second,
			},
		},
		{
			name:     "elastic: growth grants and lists as before",
			spec:     elasticSpec(3, 20*time.Second),
			listable: none,
			pods:     []*corev1.Pod{testPod(0, corev1.PodRunning)},
			want: planSummary{
				Create:  []int{1, 2},
				Desired: names(0, 1, 2),
				Exec:    names(0, 1, 2),
			},
		},
		{
			name:     "fixed: nothing listed, everything else as before",
			spec:     fixedSpec(2),
			listable: none,
			pods:     []*corev1.Pod{testPod(0, corev1.PodRunning), testPod(1, corev1.PodRunning), testPod(2, corev1.PodRunning)},
			want: planSummary{
				Drain:   names(2),
				Desired: names(0, 1),
				Exec:    names(0, 1, 2),
				Requeue: defaultDrain,
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec.Listable = tc.listable
			plan := PlanWorkers(tc.spec, workers(tc.pods...), 0, noHolders, testNow)
			if diff := cmp.Diff(tc.want, summarize(plan), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("PlanWorkers (-want +got):\n%s", diff)
			}
			checkInvariants(t, tc.pods, plan)
		})
	}
}

// TestListableAskedOfLiveRunningWorkersOnly: Listable decides only for
// workers that would be listed otherwise.
func TestListableAskedOfLiveRunningWorkersOnly(t *testing.T) {
	var asked []int
	spec := elasticSpec(2, 20*time.Second)
	spec.Listable = func(w Worker) bool {
		asked = append(asked, w.Index)
		return true
	}
	ws := workers(
		testPod(0, corev1.PodRunning), testPod(1, corev1.PodPending), testPod(2, corev1.PodFailed),
		testPod(3, corev1.PodRunning, terminating), testPod(4, corev1.PodRunning, drainingFor(time.Second)),
		testPod(5, corev1.PodRunning), testPod(6, corev1.PodRunning),
	)
	plan := PlanWorkers(spec, ws, 0, noHolders, testNow)
	// Of the live workers 0, 1, 5 and 6, worker 1 (not Running) is drained,
	// then worker 6 (the highest index).
	if diff := cmp.Diff([]int{0, 5}, asked); diff != "" {
		t.Errorf("Listable asked of (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(names(0, 5), plan.Hosts.Running); diff != "" {
		t.Errorf("Hosts.Running (-want +got):\n%s", diff)
	}
}

// TestPlanWorkersListed: Listable decides only a worker's first listing. A
// live Running worker that the script lists already stays listed whatever
// Listable says; one that stopped running or drains leaves the script as
// before; and no worker is created under a name the script still lists.
func TestPlanWorkersListed(t *testing.T) {
	none := func(Worker) bool { return false }
	listed := func(is ...int) map[string]bool {
		m := map[string]bool{}
		for _, i := range is {
			m[testWorkerName(i)] = true
		}
		return m
	}
	cases := []struct {
		name   string
		spec   Spec
		listed map[string]bool
		pods   []*corev1.Pod
		want   planSummary
	}{
		{
			name:   "elastic: listed Running workers stay listed when their names stop resolving",
			spec:   elasticSpec(3, 20*time.Second),
			listed: listed(0, 1),
			pods:   []*corev1.Pod{testPod(0, corev1.PodRunning), testPod(1, corev1.PodRunning), testPod(2, corev1.PodRunning)},
			want: planSummary{
				Desired: names(0, 1, 2),
				Running: names(0, 1),
				Exec:    names(0, 1, 2),
			},
		},
		{
			name:   "elastic: listed workers that failed or drain leave the script",
			spec:   elasticSpec(2, 20*time.Second),
			listed: listed(0, 1, 2),
			pods: []*corev1.Pod{testPod(0, corev1.PodFailed), testPod(1, corev1.PodRunning),
				testPod(2, corev1.PodRunning, drainingFor(time.Second))},
			want: planSummary{
				Create:  []int{3},
				Desired: names(1, 3),
				Running: names(1),
				Exec:    names(1, 2, 3),
				Requeue: 19 * time.Second,
			},
		},
		{
			name:   "fixed: a missing worker still listed is created once the script drops it",
			spec:   fixedSpec(3),
			listed: listed(0, 1),
			pods:   []*corev1.Pod{testPod(0, corev1.PodRunning), testPod(2, corev1.PodPending)},
			want: planSummary{
				Desired: names(0, 1, 2),
				Running: names(0),
				Exec:    names(0, 1, 2),
			},
		},
		{
			name: "fixed: a missing worker not listed is created",
			spec: fixedSpec(3),
			pods: []*corev1.Pod{testPod(0, corev1.PodRunning), testPod(2, corev1.PodPending)},
			want: planSummary{
				Create:  []int{1},
				Desired: names(0, 1, 2),
				Exec:    names(0, 1, 2),
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec.Listable, tc.spec.Listed = none, tc.listed
			plan := PlanWorkers(tc.spec, workers(tc.pods...), 0, noHolders, testNow)
			if diff := cmp.Diff(tc.want, summarize(plan), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("PlanWorkers (-want +got):\n%s", diff)
			}
			checkInvariants(t, tc.pods, plan)
		})
	}
}

// TestPlanWorkersHeldNames: a name that a pod of someone else's holds is
// neither created nor granted. A fixed job reports it in the way, and
// blocked unless that pod is on its way out; an elastic job takes the next
// free index and reports nothing.
func TestPlanWorkersHeldNames(t *testing.T) {
	holders := holdersOf(map[int]Holder{1: NameHeld, 2: NameLeaving, 4: NameHeld})
	ws := workers(testPod(0, corev1.PodRunning))
	fixed := PlanWorkers(fixedSpec(4), ws, 0, holders, testNow)
	el := PlanWorkers(elasticSpec(4, defaultDrain), ws, 0, holders, testNow)
	type held struct {
		Create            []int
		Exec, Desired     []string
		InTheWay, Blocked []string
	}
	cases := []struct {
		name string
		plan Plan
		want held
	}{
		{"fixed", fixed, held{
			Create: []int{3}, Exec: names(0, 3), Desired: names(0, 1, 2, 3),
			InTheWay: names(1, 2), Blocked: names(1),
		}},
		{"elastic", el, held{Create: []int{3, 5, 6}, Exec: names(0, 3, 5, 6), Desired: names(0, 3, 5, 6)}},
	}
	for _, tc := range cases {
		got := held{tc.plan.Create, tc.plan.Exec, tc.plan.Hosts.Desired, tc.plan.InTheWay, tc.plan.Blocked}
		if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// TestPlanWorkersMaxPods: creations that would take the workers the Role
// names (listed, draining, about to be created) past Spec.MaxPods wait for
// drained workers to go; the drain and the deletions go on meanwhile, and
// finished or terminating workers do not count.
func TestPlanWorkersMaxPods(t *testing.T) {
	drain := time.Minute
	cases := []struct {
		name       string
		spec       Spec
		pods       []*corev1.Pod
		wantCreate []int
		wantHeld   int
		wantRemove []string
	}{
		{
			name:       "room for every creation",
			spec:       withMax(elasticSpec(4, drain), 4),
			pods:       []*corev1.Pod{testPod(0, corev1.PodRunning), testPod(1, corev1.PodRunning)},
			wantCreate: []int{2, 3},
		},
		{
			name: "scaled out again while the last scale-in drains: held back",
			spec: withMax(elasticSpec(3, drain), 4),
			pods: []*corev1.Pod{testPod(0, corev1.PodRunning),
				testPod(1, corev1.PodRunning, drainingFor(time.Second)), testPod(2, corev1.PodRunning, drainingFor(time.Second))},
			wantCreate: []int{3},
			wantHeld:   1,
		},
		{
			name: "drained workers are deleted while creations wait",
			spec: withMax(elasticSpec(2, drain), 2),
			pods: []*corev1.Pod{testPod(0, corev1.PodRunning),
				testPod(1, corev1.PodRunning, drainingFor(2*drain))},
			wantHeld:   1,
			wantRemove: names(1),
		},
		{
			name: "terminating and finished workers take no room",
			spec: withMax(elasticSpec(2, drain), 2),
			pods: []*corev1.Pod{testPod(0, corev1.PodRunning, terminating), testPod(1, corev1.PodFailed,
				annotate(AnnotationReplacedBy, ReplacedByNone))},
			wantCreate: []int{2, 3},
		},
		{
			name:       "a fixed job too",
			spec:       withMax(fixedSpec(3), 2),
			pods:       []*corev1.Pod{testPod(0, corev1.PodRunning)},
			wantCreate: []int{1},
			wantHeld:   1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan := PlanWorkers(tc.spec, workers(tc.pods...), 0, noHolders, testNow)
			if diff := cmp.Diff(tc.wantCreate, plan.Create); diff != "" {
				t.Errorf("create (-want +got):\n%s", diff)
			}
			if plan.HeldBack != tc.wantHeld {
				t.Errorf("held back %d, want %d", plan.HeldBack, tc.wantHeld)
			}
			if diff := cmp.Diff(tc.wantRemove, podNames(plan.Remove)); diff != "" {
				t.Errorf("remove (-want +got):\n%s", diff)
			}
			if len(plan.Exec) > tc.spec.MaxPods {
				t.Errorf("exec names %d workers, more than MaxPods %d: %v", len(plan.Exec), tc.spec.MaxPods, plan.Exec)
			}
		})
	}
}

func withMax(s Spec, maxPods int) Spec {
	s.MaxPods = maxPods
	return s
}
