package elastic

import (
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The fuzz tests run their seeds with every go test; `make fuzz` (part of
// make test) runs each one for a bounded number of inputs.

// fuzzBytes hands out the fuzzer's bytes as small numbers; past the end it
// gives zeros.
type fuzzBytes []byte

func (b *fuzzBytes) next(n int) int {
	if len(*b) == 0 || n <= 0 {
		return 0
	}
	v := int((*b)[0]) % n
	*b = (*b)[1:]
	return v
}

// fuzzInput is a job's spec and workers decoded from the fuzzer's bytes.
type fuzzInput struct {
	spec      Spec
	workers   []Worker
	holders   map[int]Holder
	nextIndex int
	// unlisted are the indices Spec.Listable refuses.
	unlisted map[int]bool
}

// decodeFuzz builds a job and its workers from the fuzzer's bytes: replicas,
// whether it is elastic, pods at random indices in random states, some
// names held by pods of someone else's, the recorded next index, and last
// the workers that may not be listed yet (none when the bytes run out).
func decodeFuzz(data []byte) fuzzInput {
	b := fuzzBytes(data)
	in := fuzzInput{spec: fixedSpec(0), holders: map[int]Holder{}, unlisted: map[int]bool{}}
	in.spec.Elastic = b.next(2) == 1
	in.spec.Replicas = b.next(40)
	phases := []corev1.PodPhase{"", corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed}
	var pods []*corev1.Pod
	used := map[int]bool{}
	for range b.next(30) {
		i := b.next(60)
		if used[i] {
			continue
		}
		used[i] = true
		var opts []func(*corev1.Pod)
		switch b.next(4) {
		case 1:
			opts = append(opts, drainingFor(time.Duration(b.next(90))*time.Second))
		case 2:
			opts = append(opts, terminating)
		}
		if b.next(3) == 0 {
			opts = append(opts, withCost(b.next(5)-2))
		}
		pods = append(pods, testPod(i, phases[b.next(len(phases))], opts...))
	}
	for range b.next(8) {
		if i := b.next(70); !used[i] {
			in.holders[i] = Holder(1 + b.next(2))
		}
	}
	in.nextIndex = b.next(70)
	in.workers = workers(pods...)
	for _, w := range in.workers {
		in.unlisted[w.Index] = b.next(2) == 1
	}
	in.spec.Listable = func(w Worker) bool { return !in.unlisted[w.Index] }
	return in
}

// FuzzPlanWorkers checks the planner's invariants on random jobs: it never
// lists or deletes what it must not, never grants exec on a name that is
// not the job's, never gives out a name twice, lists only what Listable
// accepts, and allocates in proportion to what it plans, not to the
// replica count.
func FuzzPlanWorkers(f *testing.F) {
	f.Add([]byte{0, 3, 2, 0, 2, 0, 0, 1, 2, 0, 0})
	f.Add([]byte{1, 5, 4, 0, 2, 0, 0, 3, 4, 1, 20, 0, 6, 4, 2, 0, 2, 1, 1, 2, 9, 3})
	f.Add([]byte{1, 0, 6, 1, 2, 1, 3, 2, 2, 0, 0, 4, 4, 2, 5, 3, 3, 1, 1, 1, 1})
	// Three Running workers of three, the middle one not listable yet.
	f.Add([]byte{1, 3, 3, 0, 0, 1, 2, 1, 0, 1, 2, 2, 0, 1, 2, 0, 0, 0, 1, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := decodeFuzz(data)
		plan := PlanWorkers(in.spec, in.workers, in.nextIndex, holdersOf(in.holders), testNow)
		checkPlan(t, in, plan)
	})
}

func checkPlan(t *testing.T, in fuzzInput, plan Plan) {
	t.Helper()
	exec := checkCreated(t, in, plan)
	byName := map[string]Worker{}
	for _, w := range in.workers {
		byName[w.Pod.Name] = w
	}
	for n := range exec {
		if w, exists := byName[n]; exists && w.Finished() && !w.Draining() {
			t.Errorf("grants exec into %s, which has finished", n)
		} else if !exists && !slices.ContainsFunc(plan.Create, func(i int) bool { return testWorkerName(i) == n }) {
			t.Errorf("grants exec into %s, which neither exists nor is created", n)
		}
	}
	for _, i := range slices.Sorted(maps.Keys(in.holders)) {
		if exec[testWorkerName(i)] {
			t.Errorf("grants exec into %s, whose name a pod of someone else's holds", testWorkerName(i))
		}
	}
	listed := map[string]bool{}
	for _, n := range plan.Hosts.Running {
		listed[n] = true
		w, ok := byName[n]
		if !ok || !w.Running() || !w.Live() {
			t.Errorf("lists %s, which is not a live Running worker", n)
		}
		if in.unlisted[w.Index] {
			t.Errorf("lists %s, which Listable refuses", n)
		}
		if !exec[n] {
			t.Errorf("lists %s without exec", n)
		}
	}
	checkRemoved(t, in, plan, byName, listed)
}

// checkCreated checks the plan's new workers and returns its exec grants.
func checkCreated(t *testing.T, in fuzzInput, plan Plan) map[string]bool {
	t.Helper()
	exec := map[string]bool{}
	for _, n := range plan.Exec {
		if exec[n] {
			t.Errorf("exec lists %s twice", n)
		}
		exec[n] = true
	}
	existing := map[int]bool{}
	for _, w := range in.workers {
		existing[w.Index] = true
	}
	created := map[int]bool{}
	for _, i := range plan.Create {
		name := testWorkerName(i)
		if existing[i] || created[i] {
			t.Errorf("creates %s, which exists or is created twice", name)
		}
		if in.holders[i] != NameFree {
			t.Errorf("creates %s, whose name a pod of someone else's holds", name)
		}
		if !exec[name] {
			t.Errorf("creates %s without granting exec first", name)
		}
		if in.spec.Elastic && i < plan.NextIndex {
			t.Errorf("elastic job reuses index %d below %d", i, plan.NextIndex)
		}
		created[i] = true
	}
	if len(plan.Create) > in.spec.Replicas {
		t.Errorf("creates %d workers for %d replicas", len(plan.Create), in.spec.Replicas)
	}
	return exec
}

// checkRemoved checks the plan's drains and deletions, and that an elastic
// plan keeps exactly the replicas live.
func checkRemoved(t *testing.T, in fuzzInput, plan Plan, byName map[string]Worker, listed map[string]bool) {
	t.Helper()
	for _, p := range plan.Remove {
		if listed[p.Name] || slices.Contains(plan.Hosts.Desired, p.Name) && in.spec.Elastic {
			t.Errorf("deletes %s, which the files list", p.Name)
		}
		if w := byName[p.Name]; w.Live() && !w.Finished() {
			t.Errorf("deletes live worker %s without draining it", p.Name)
		}
	}
	for _, p := range plan.Drain {
		if listed[p.Name] {
			t.Errorf("drains %s and lists it", p.Name)
		}
		if w := byName[p.Name]; !w.Live() {
			t.Errorf("drains %s, which is not live", p.Name)
		}
	}
	if in.spec.Elastic {
		live := 0
		for _, w := range in.workers {
			if w.Live() {
				live++
			}
		}
		if got := live + len(plan.Create) - len(plan.Drain); got != in.spec.Replicas {
			t.Errorf("elastic plan leaves %d live workers, want %d", got, in.spec.Replicas)
		}
	}
}
