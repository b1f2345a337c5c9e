package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
)

func namesTestJob(name string) *kubeflow.MPIJob {
	return &kubeflow.MPIJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
}

func TestWorkerIndex(t *testing.T) {
	pod := func(name string, lbls map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: lbls}}
	}
	cases := []struct {
		name      string
		job       string
		pod       *corev1.Pod
		wantIndex int
		wantOK    bool
	}{
		{"v0.3.0 label", "job", pod("whatever", map[string]string{"replica-index": "3"}), 3, true},
		{"kubeflow/common label", "job", pod("whatever", map[string]string{common.ReplicaIndexLabel: "4"}), 4, true},
		{"both labels", "job", pod("job-worker-5", map[string]string{"replica-index": "5", common.ReplicaIndexLabel: "5"}), 5, true},
		{"label wins over the name", "job", pod("job-worker-9", map[string]string{"replica-index": "2"}), 2, true},
		{"bad v0.3.0 label falls back to the other label", "job", pod("x", map[string]string{"replica-index": "abc", common.ReplicaIndexLabel: "6"}), 6, true},
		{"negative label falls back to the name", "job", pod("job-worker-7", map[string]string{"replica-index": "-1"}), 7, true},
		{"non-numeric label falls back to the name", "job", pod("job-worker-8", map[string]string{common.ReplicaIndexLabel: "eight"}), 8, true},
		{"index 0 from a label", "job", pod("x", map[string]string{"replica-index": "0"}), 0, true},
		{"name suffix", "job", pod("job-worker-12", nil), 12, true},
		{"name suffix 0", "job", pod("job-worker-0", nil), 0, true},
		{"job name with dashes", "my-job-worker", pod("my-job-worker-worker-3", nil), 3, true},
		{"leading zero in the name", "job", pod("job-worker-01", nil), 0, false},
		{"plus sign in the name", "job", pod("job-worker-+1", nil), 0, false},
		{"negative name suffix", "job", pod("job-worker--1", nil), 0, false},
		{"non-numeric name suffix", "job", pod("job-worker-a", nil), 0, false},
		{"empty name suffix", "job", pod("job-worker-", nil), 0, false},
		{"another job's worker", "job", pod("other-worker-1", nil), 0, false},
		{"a prefix of the job name is not enough", "job", pod("jobs-worker-1", nil), 0, false},
		{"the launcher", "job", pod("job-launcher", nil), 0, false},
		{"bad labels and no usable name", "job", pod("job-launcher", map[string]string{"replica-index": "x", common.ReplicaIndexLabel: "-2"}), 0, false},
		{"suffix with trailing text", "job", pod("job-worker-1a", nil), 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			i, ok := workerIndex(namesTestJob(tc.job), tc.pod)
			if ok != tc.wantOK || (ok && i != tc.wantIndex) {
				t.Errorf("workerIndex = %d, %v; want %d, %v", i, ok, tc.wantIndex, tc.wantOK)
			}
		})
	}
}

// TestWorkerIndexRoundTrip: every worker the builder makes reads back its
// own index, by its labels and by its name alone.
func TestWorkerIndexRoundTrip(t *testing.T) {
	job := newTestJobForBuilders(3)
	for _, i := range []int{0, 1, 9, 10, 123} {
		p := newWorker(job, i, "")
		if got, ok := workerIndex(job, p); !ok || got != i {
			t.Errorf("worker %d reads back as %d, %v", i, got, ok)
		}
		p.Labels = nil
		if got, ok := workerIndex(job, p); !ok || got != i {
			t.Errorf("worker %d without labels reads back as %d, %v", i, got, ok)
		}
	}
}

func TestChildNamesAndLabels(t *testing.T) {
	job := namesTestJob("pi")
	got := []string{configMapName(job), launcherName(job), workerName(job, 0), workerName(job, 10)}
	want := []string{"pi-config", "pi-launcher", "pi-worker-0", "pi-worker-10"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	wantLabels := map[string]string{"group-name": "kubeflow.org", "mpi-job-name": "pi", "mpi-job-role": "launcher"}
	if diff := cmp.Diff(wantLabels, podLabels(job, roleLauncher)); diff != "" {
		t.Errorf("launcher labels (-want +got):\n%s", diff)
	}
	sel := workerSelector(job)
	if got := sel.String(); got != "group-name=kubeflow.org,mpi-job-name=pi,mpi-job-role=worker" {
		t.Errorf("worker selector %q", got)
	}
	for _, tc := range []struct {
		lbls labels.Set
		want bool
	}{
		{labels.Set{"group-name": "kubeflow.org", "mpi-job-name": "pi", "mpi-job-role": "worker", "replica-index": "3"}, true},
		{labels.Set{"group-name": "kubeflow.org", "mpi-job-name": "pi", "mpi-job-role": "launcher"}, false},
		{labels.Set{"group-name": "kubeflow.org", "mpi-job-name": "pi2", "mpi-job-role": "worker"}, false},
	} {
		if got := sel.Matches(tc.lbls); got != tc.want {
			t.Errorf("selector matches %v = %v, want %v", tc.lbls, got, tc.want)
		}
	}
}
