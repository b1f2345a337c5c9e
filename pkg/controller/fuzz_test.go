package controller

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
)

// The fuzz tests run their seeds with every go test; `make fuzz` (part of
// make test) runs each one for a bounded time.

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

// fuzzWorkers builds a job and its workers from the fuzzer's bytes:
// replicas, an optional elastic policy, and pods at random indices in
// random states, some names held by pods of someone else's.
func fuzzWorkers(data []byte) (*kubeflow.MPIJob, []worker, map[int]holder, int) {
	b := fuzzBytes(data)
	var ep *kubeflow.ElasticPolicy
	if b.next(2) == 1 {
		ep = &kubeflow.ElasticPolicy{}
	}
	job := workersTestJob(int32(b.next(40)), ep)
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
			opts = append(opts, wtDrainingFor(time.Duration(b.next(90))*time.Second))
		case 2:
			opts = append(opts, wtTerminating)
		}
		if b.next(3) == 0 {
			opts = append(opts, wtCost(b.next(5)-2))
		}
		pods = append(pods, wtPod(i, phases[b.next(len(phases))], opts...))
	}
	holders := map[int]holder{}
	for range b.next(8) {
		if i := b.next(70); !used[i] {
			holders[i] = holder(1 + b.next(2))
		}
	}
	return job, toWorkers(job, pods), holders, b.next(70)
}

// FuzzPlanWorkers checks the planner's invariants on random jobs: it never
// lists or deletes what it must not, never grants exec on a name that is
// not the job's, never gives out a name twice, and allocates in proportion
// to what it plans, not to the replica count.
func FuzzPlanWorkers(f *testing.F) {
	f.Add([]byte{0, 3, 2, 0, 2, 0, 0, 1, 2, 0, 0})
	f.Add([]byte{1, 5, 4, 0, 2, 0, 0, 3, 4, 1, 20, 0, 6, 4, 2, 0, 2, 1, 1, 2, 9, 3})
	f.Add([]byte{1, 0, 6, 1, 2, 1, 3, 2, 2, 0, 0, 4, 4, 2, 5, 3, 3, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		job, ws, holders, next := fuzzWorkers(data)
		plan := planWorkers(job, ws, next, holdersOf(holders), workersTestNow)
		checkPlan(t, job, ws, holders, plan)
	})
}

func checkPlan(t *testing.T, job *kubeflow.MPIJob, ws []worker, holders map[int]holder, plan workerPlan) {
	t.Helper()
	byName := map[string]worker{}
	for _, w := range ws {
		byName[w.pod.Name] = w
	}
	exec := map[string]bool{}
	for _, n := range plan.exec {
		if exec[n] {
			t.Errorf("exec lists %s twice", n)
		}
		exec[n] = true
	}
	created := map[int]bool{}
	for _, i := range plan.create {
		name := workerName(job, i)
		if _, exists := byName[name]; exists || created[i] {
			t.Errorf("creates %s, which exists or is created twice", name)
		}
		if holders[i] != nameFree {
			t.Errorf("creates %s, whose name a pod of someone else's holds", name)
		}
		if !exec[name] {
			t.Errorf("creates %s without granting exec first", name)
		}
		if job.Spec.ElasticPolicy != nil && i < plan.nextIndex {
			t.Errorf("elastic job reuses index %d below %d", i, plan.nextIndex)
		}
		created[i] = true
	}
	for n := range exec {
		if w, exists := byName[n]; exists && w.finished() && !w.draining() {
			t.Errorf("grants exec into %s, which has finished", n)
		} else if !exists && !slices.ContainsFunc(plan.create, func(i int) bool { return workerName(job, i) == n }) {
			t.Errorf("grants exec into %s, which neither exists nor is created", n)
		}
	}
	for _, i := range sortedKeys(holders) {
		if exec[workerName(job, i)] {
			t.Errorf("grants exec into %s, whose name a pod of someone else's holds", workerName(job, i))
		}
	}
	listed := map[string]bool{}
	for _, n := range plan.hosts.running {
		listed[n] = true
		w, ok := byName[n]
		if !ok || !w.running() || !w.live() {
			t.Errorf("lists %s, which is not a live Running worker", n)
		}
		if !exec[n] {
			t.Errorf("lists %s without exec", n)
		}
	}
	for _, p := range plan.remove {
		if listed[p.Name] || slices.Contains(plan.hosts.desired, p.Name) && job.Spec.ElasticPolicy != nil {
			t.Errorf("deletes %s, which the files list", p.Name)
		}
		if w := byName[p.Name]; w.live() && !w.finished() {
			t.Errorf("deletes live worker %s without draining it", p.Name)
		}
	}
	for _, p := range plan.drain {
		if listed[p.Name] {
			t.Errorf("drains %s and lists it", p.Name)
		}
		if w := byName[p.Name]; !w.live() {
			t.Errorf("drains %s, which is not live", p.Name)
		}
	}
	if len(plan.create) > desiredWorkers(job) {
		t.Errorf("creates %d workers for %d replicas", len(plan.create), desiredWorkers(job))
	}
	if job.Spec.ElasticPolicy != nil {
		live := 0
		for _, w := range ws {
			if w.live() {
				live++
			}
		}
		if got := live + len(plan.create) - len(plan.drain); got != desiredWorkers(job) {
			t.Errorf("elastic plan leaves %d live workers, want %d", got, desiredWorkers(job))
		}
	}
}

func sortedKeys(m map[int]holder) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// FuzzSync runs whole syncs on jobs decoded from the fuzzer's bytes, as any
// client could send them past an older CRD: a sync never panics, and a job
// it cannot run ends Failed or Blocked with its field named, never silent.
func FuzzSync(f *testing.F) {
	seed := func(job *kubeflow.MPIJob) {
		data, err := json.Marshal(job.Spec)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	seed(newTestJob("pi", 2))
	elastic := newTestJob("pi", 3)
	elastic.Spec.ElasticPolicy = &kubeflow.ElasticPolicy{MinReplicas: ptr[int32](1), MaxReplicas: ptr[int32](4)}
	seed(elastic)
	bad := newTestJob("pi", -1)
	bad.Spec.MainContainer = "Nope"
	bad.Spec.MPIReplicaSpecs["Chief"] = nil
	seed(bad)
	f.Add([]byte(`{"mpiReplicaSpecs":{"Launcher":null,"Worker":{"replicas":2000000000}}}`))
	// Past the bound on workers: refused before any planning allocates.
	f.Add([]byte(`{"mpiReplicaSpecs":{"Launcher":{"template":{"spec":{"containers":[{"name":"l"}]}}},"Worker":{"replicas":2000000000,"template":{"spec":{"containers":[{"name":"w"}]}}}},"elasticPolicy":{"maxReplicas":2000000000}}`))
	f.Add([]byte(`{"mpiReplicaSpecs":{},"runPolicy":{"backoffLimit":-3,"cleanPodPolicy":"Sometimes"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		job := newTestJob("pi", 0)
		job.Spec = kubeflow.MPIJobSpec{}
		if err := json.Unmarshal(data, &job.Spec); err != nil {
			return
		}
		fx := newFixture(t)
		fx.jobs = append(fx.jobs, job)
		_, err := fx.syncErr(job)
		var spec *specError
		if errors.As(err, &spec) {
			t.Fatalf("a job that never started was held, not failed: %v", err)
		}
		if err != nil && !isBlocked(err) {
			t.Fatalf("sync: %v", err)
		}
		st := fx.writtenStatus()
		if errs := validateJob(defaultedCopy(job)); len(errs) > 0 {
			c := findCondition(&st, common.JobFailed)
			if c == nil || c.Reason != reasonInvalidSpec {
				t.Fatalf("invalid job (%v) not failed: %+v", errs.ToAggregate(), st.Conditions)
			}
		}
	})
}

func defaultedCopy(job *kubeflow.MPIJob) *kubeflow.MPIJob {
	d := job.DeepCopy()
	kubeflow.SetDefaults_MPIJob(d)
	return d
}
