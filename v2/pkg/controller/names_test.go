package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

func TestNames(t *testing.T) {
	job := newTestJob(2)
	for _, tc := range []struct{ name, got, want string }{
		{"service", serviceName(job), "job"},
		{"config", configMapName(job), "job-config"},
		{"ssh", sshSecretName(job), "job-ssh"},
		{"launcher", launcherName(job), "job-launcher"},
		{"podGroup", podGroupName(job), "job"},
		{"worker0", workerName(job, 0), "job-worker-0"},
		{"worker12", workerName(job, 12), "job-worker-12"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s name %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

func TestWorkerIndex(t *testing.T) {
	cases := []struct {
		name      string
		podName   string
		labels    map[string]string
		wantIndex int
		wantOK    bool
	}{
		{name: "a label without the name does not count", podName: "anything", labels: map[string]string{"training.kubeflow.org/replica-index": "3"}},
		{name: "the name, not the label, as with the launcher as a worker", podName: "job-worker-1", labels: map[string]string{"training.kubeflow.org/replica-index": "2"}, wantIndex: 1, wantOK: true},
		{name: "name suffix", podName: "job-worker-12", wantIndex: 12, wantOK: true},
		{name: "name suffix 0", podName: "job-worker-0", wantIndex: 0, wantOK: true},
		{name: "a malformed label", podName: "job-worker-4", labels: map[string]string{"training.kubeflow.org/replica-index": "04"}, wantIndex: 4, wantOK: true},
		{name: "a malformed label and another name", podName: "job-launcher", labels: map[string]string{"training.kubeflow.org/replica-index": "x"}},
		{name: "leading zero", podName: "job-worker-01"},
		{name: "sign", podName: "job-worker-+1"},
		{name: "negative", podName: "job-worker--1"},
		{name: "space", podName: "job-worker- 1"},
		{name: "trailing letters", podName: "job-worker-1a"},
		{name: "no number", podName: "job-worker-"},
		{name: "hex", podName: "job-worker-0x1"},
		{name: "overflow", podName: "job-worker-99999999999999999999"},
		{name: "another job's worker", podName: "job2-worker-1"},
		{name: "a job whose name ends like ours", podName: "myjob-worker-1"},
		{name: "the launcher", podName: "job-launcher"},
		{name: "upstream's old label alone does not count", podName: "x", labels: map[string]string{"replica-index": "1"}},
	}
	job := newTestJob(2)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tc.podName, Labels: tc.labels}}
			index, ok := workerIndex(job, pod)
			if index != tc.wantIndex || ok != tc.wantOK {
				t.Errorf("workerIndex(%q, %v) = %d, %t; want %d, %t", tc.podName, tc.labels, index, ok, tc.wantIndex, tc.wantOK)
			}
		})
	}
}

// TestWorkerIndexRoundTrip: every index the controller writes reads back,
// the launcher a worker or not.
func TestWorkerIndexRoundTrip(t *testing.T) {
	for _, asWorker := range []bool{false, true} {
		job := newTestJob(2, func(j *v2beta1.MPIJob) { j.Spec.RunLauncherAsWorker = ptr(asWorker) })
		for _, i := range []int{0, 1, 9, 10, 99, 4999, 1 << 30} {
			byName := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: workerName(job, i)}}
			if got, ok := workerIndex(job, byName); !ok || got != i {
				t.Errorf("worker %d by name: %d, %t", i, got, ok)
			}
			if got, ok := workerIndex(job, newWorker(job, i, gangScheduler{}, "")); !ok || got != i {
				t.Errorf("worker %d as built, launcher as a worker %t: %d, %t", i, asWorker, got, ok)
			}
		}
	}
}

func TestSelectors(t *testing.T) {
	job := newTestJob(2)
	worker := labels.Set(newWorker(job, 1, gangScheduler{}, "").Labels)
	launcher := labels.Set(newLauncherJob(job, gangScheduler{}).Spec.Template.Labels)
	other := labels.Set(newWorker(newTestJob(2, func(j *v2beta1.MPIJob) { j.Name = "job2" }), 1, gangScheduler{}, "").Labels)
	cases := []struct {
		name     string
		selector labels.Selector
		set      labels.Set
		want     bool
	}{
		{"workerSelector selects a worker", workerSelector(job), worker, true},
		{"workerSelector skips the launcher", workerSelector(job), launcher, false},
		{"workerSelector skips another job's worker", workerSelector(job), other, false},
		{"launcherSelector selects the launcher", launcherSelector(job), launcher, true},
		{"launcherSelector skips a worker", launcherSelector(job), worker, false},
	}
	for _, tc := range cases {
		if got := tc.selector.Matches(tc.set); got != tc.want {
			t.Errorf("%s: %s matches %v: %t, want %t", tc.name, tc.selector, tc.set, got, tc.want)
		}
	}
	if got, want := workerSelector(job).String(),
		"training.kubeflow.org/job-name=job,training.kubeflow.org/job-role=worker,training.kubeflow.org/operator-name=mpi-operator"; got != want {
		t.Errorf("workerSelector: %q, want %q", got, want)
	}
}
