package elastic

import (
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// testNow is the fixed "now" of every planning test.
var testNow = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// defaultDrain is the drain period of the tests' fixed jobs.
const defaultDrain = 30 * time.Second

// testWorkerName names the workers of the tests' job "job".
func testWorkerName(i int) string { return "job-worker-" + strconv.Itoa(i) }

// testIndex reads a test pod's index from its replica-index label, else
// from its name.
func testIndex(p *corev1.Pod) (int, bool) {
	if v, ok := p.Labels["replica-index"]; ok {
		return ParseIndex(v)
	}
	suffix, ok := strings.CutPrefix(p.Name, "job-worker-")
	if !ok {
		return 0, false
	}
	return ParseIndex(suffix)
}

// fixedSpec is the spec of a job without an elastic policy.
func fixedSpec(replicas int) Spec {
	return Spec{Replicas: replicas, DrainPeriod: defaultDrain, WorkerName: testWorkerName}
}

// elasticSpec is the spec of an elastic job.
func elasticSpec(replicas int, drain time.Duration) Spec {
	s := fixedSpec(replicas)
	s.Elastic, s.DrainPeriod = true, drain
	return s
}

// testPod is a worker pod with the given index and phase.
func testPod(index int, phase corev1.PodPhase, opts ...func(*corev1.Pod)) *corev1.Pod {
	name := testWorkerName(index)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: "ns",
			UID:       types.UID(name + "-uid"),
			Labels:    map[string]string{"replica-index": strconv.Itoa(index)},
		},
		Status: corev1.PodStatus{Phase: phase},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func annotate(key, value string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[key] = value
	}
}

// drainingFor marks a pod draining since d before testNow.
func drainingFor(d time.Duration) func(*corev1.Pod) {
	return annotate(AnnotationDrainingSince, testNow.Add(-d).Format(time.RFC3339))
}

func withCost(c int) func(*corev1.Pod) { return annotate(AnnotationDeletionCost, strconv.Itoa(c)) }

func terminating(p *corev1.Pod) {
	ts := metav1.NewTime(testNow.Add(-time.Second))
	p.DeletionTimestamp = &ts
}

// workers parses pods as the tests' job does.
func workers(pods ...*corev1.Pod) []Worker { return ParseWorkers(pods, testIndex) }

// names are the names of the workers with these indices.
func names(indices ...int) []string {
	out := make([]string, 0, len(indices))
	for _, i := range indices {
		out = append(out, testWorkerName(i))
	}
	return out
}

func podNames(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// noHolders is the holder function of a namespace with no pod of anyone
// else's.
func noHolders(int) Holder { return NameFree }

// holdersOf returns the holder function for the indices in m.
func holdersOf(m map[int]Holder) func(int) Holder {
	return func(i int) Holder { return m[i] }
}

func ptr[T any](v T) *T { return &v }
