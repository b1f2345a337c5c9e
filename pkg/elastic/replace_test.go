package elastic

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestReplacements(t *testing.T) {
	failed := func(i int, opts ...func(*corev1.Pod)) *corev1.Pod {
		p := testPod(i, corev1.PodFailed, opts...)
		p.Status.Reason = "Evicted"
		return p
	}
	cases := []struct {
		name    string
		pods    []*corev1.Pod
		created []int
		want    map[string]string // failed worker -> replaced by
	}{
		{name: "nothing failed", pods: []*corev1.Pod{testPod(0, corev1.PodRunning)}, created: []int{1}},
		{name: "one failure, one new worker", pods: []*corev1.Pod{testPod(0, corev1.PodRunning), failed(1)}, created: []int{2},
			want: map[string]string{"job-worker-1": "job-worker-2"}},
		{name: "failures in index order take the new workers in order", pods: []*corev1.Pod{failed(4), failed(1), testPod(0, corev1.PodRunning)},
			created: []int{5, 6}, want: map[string]string{"job-worker-1": "job-worker-5", "job-worker-4": "job-worker-6"}},
		{name: "more failures than new workers: the rest by none", pods: []*corev1.Pod{failed(0), failed(1)}, created: []int{2},
			want: map[string]string{"job-worker-0": "job-worker-2", "job-worker-1": ReplacedByNone}},
		{name: "no new worker", pods: []*corev1.Pod{failed(0)},
			want: map[string]string{"job-worker-0": ReplacedByNone}},
		{name: "a failure marked already keeps its mark and takes no new worker",
			pods:    []*corev1.Pod{failed(0, annotate(AnnotationReplacedBy, "job-worker-2")), failed(1)},
			created: []int{3}, want: map[string]string{"job-worker-1": "job-worker-3"}},
		{name: "a failed worker being deleted is left alone", pods: []*corev1.Pod{failed(0, terminating), failed(1)},
			created: []int{2}, want: map[string]string{"job-worker-1": "job-worker-2"}},
		{name: "succeeded and draining workers are no failures",
			pods: []*corev1.Pod{testPod(0, corev1.PodSucceeded), testPod(1, corev1.PodRunning, drainingFor(0))}, created: []int{2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got map[string]string
			for _, r := range Replacements(workers(tc.pods...), tc.created, testWorkerName) {
				if got == nil {
					got = map[string]string{}
				}
				got[r.Failed.Name] = r.By
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Replacements (-want +got):\n%s", diff)
			}
		})
	}
}
