package controller

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// TestFinishedJobCleansUp: a finished job's workers go as cleanPodPolicy
// says, only once its end is recorded, after discover_hosts.sh is emptied,
// and the PodGroup goes with them.
func TestFinishedJobCleansUp(t *testing.T) {
	cases := map[v2beta1.CleanPodPolicy][]action{
		v2beta1.CleanPodPolicyRunning: {update("configmaps", "job-config"), del("pods", "job-worker-0")},
		v2beta1.CleanPodPolicyAll: {update("configmaps", "job-config"),
			del("pods", "job-worker-0"), del("pods", "job-worker-1")},
	}
	for policy, want := range cases {
		t.Run(string(policy), func(t *testing.T) {
			f := newFixture(t)
			f.cfg.GangSchedulerName = "volcano"
			f.start(storedJob(2, func(j *v2beta1.MPIJob) { j.Spec.RunPolicy.CleanPodPolicy = ptr(policy) }))
			runningJob(t, f, "job-worker-0", "job-worker-1")
			f.setPhase(corev1.PodSucceeded, "job-worker-1")
			f.setLauncherStatus(batchv1.JobStatus{Succeeded: 1, Conditions: []batchv1.JobCondition{
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}})
			f.step()
			f.expectWrites(statusUpdate()) // recorded first
			f.step()
			f.expectWrites(want...)
			f.expectListed()
			f.expectGroupWrites(del("podgroups", "job"))
		})
	}
}

// TestFinishedJobKeepsItsPodsWithPolicyNone: the default keeps the pods
// and the PodGroup.
func TestFinishedJobKeepsItsPodsWithPolicyNone(t *testing.T) {
	f := newFixture(t)
	f.cfg.GangSchedulerName = "volcano"
	f.start(storedJob(1))
	runningJob(t, f, "job-worker-0")
	f.setLauncherStatus(batchv1.JobStatus{Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}})
	f.step()
	f.step()
	f.expectWrites()
	f.expectGroupWrites()
}
