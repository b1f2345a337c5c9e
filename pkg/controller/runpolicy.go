package controller

import (
	"context"
	"fmt"
	"time"

	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// checkDeadline fails the job once it has been active for longer than
// runPolicy.activeDeadlineSeconds.
func (c *MPIJobController) checkDeadline(job *kubeflow.MPIJob, now metav1.Time) bool {
	left, ok := deadlineLeft(job, now)
	if !ok || left > 0 {
		return false
	}
	msg := fmt.Sprintf("MPIJob %s/%s has run longer than its activeDeadlineSeconds (%ds).",
		job.Namespace, job.Name, *job.Spec.RunPolicy.ActiveDeadlineSeconds)
	c.failJob(job, reasonDeadlineExceeded, msg, now)
	return true
}

func deadlineLeft(job *kubeflow.MPIJob, now metav1.Time) (time.Duration, bool) {
	rp := job.Spec.RunPolicy
	if rp == nil || rp.ActiveDeadlineSeconds == nil || job.Status.StartTime == nil {
		return 0, false
	}
	end := job.Status.StartTime.Add(time.Duration(*rp.ActiveDeadlineSeconds) * time.Second)
	return end.Sub(now.Time), true
}

// reconcileFinished winds down a finished job whose end is recorded in the
// status the cache shows: discover_hosts.sh lists no host any more, the
// pods that cleanPodPolicy names are deleted (all active pods when the job
// failed for running too long, restarting too often or staying below its
// minimum of workers), and the job itself is deleted once its TTL has
// passed. As the Job controller does, it acts only once the end is
// recorded: until then the status write that records it may still be lost
// or conflict, and the job update event that follows a successful one
// brings the job back (checkJob sees to that).
func (c *MPIJobController) reconcileFinished(ctx context.Context, obs *observed, now metav1.Time) (time.Duration, error) {
	job := obs.job
	if job.Status.CompletionTime == nil {
		job.Status.CompletionTime = &now
	}
	if err := c.clearHosts(ctx, job); err != nil {
		return 0, err
	}
	victims := podsToClean(job, obs.launcher, obs.pods)
	if len(victims) > 0 && c.Expectations.SettledSince(obs.seen, jobKey(job)) {
		if _, err := reconcile.InBatches(len(victims), reconcile.MaxBatch, func(i int) error { return c.Pods.Delete(ctx, owner(job), victims[i]) }); err != nil {
			return 0, err
		}
		c.Recorder.Eventf(job, corev1.EventTypeNormal, eventDeletingPods, "Deleted %d pod(s) of the finished job", len(victims))
	}
	if err := c.deletePodGroup(ctx, job); err != nil {
		return 0, err
	}
	return c.checkTTL(ctx, job, now)
}

// clearHosts empties the discovery script of a finished job, before any of
// its workers is deleted. A job that never got a ConfigMap has none to clear.
func (c *MPIJobController) clearHosts(ctx context.Context, job *kubeflow.MPIJob) error {
	cur, err := c.configMaps.Get(job.Namespace, configMapName(job))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !metav1.IsControlledBy(cur, job) {
		return nil
	}
	want := cur.DeepCopy()
	want.Data = map[string]string{}
	for k, v := range cur.Data {
		want.Data[k] = v
	}
	want.Data[discoverHostsKey] = "#!/bin/sh\n"
	_, err = reconcile.Ensure(ctx, owner(job), c.configMapChild(job), want)
	return err
}

// stopsAllPods tells whether a finished job failed in a way that stops its
// active pods whatever cleanPodPolicy says: it ran too long, restarted too
// often or stayed below its minimum of workers.
func stopsAllPods(job *kubeflow.MPIJob) bool {
	cond := conditions.Find(job.Status.Conditions, common.JobFailed)
	if cond == nil || cond.Status != corev1.ConditionTrue {
		return false
	}
	switch cond.Reason {
	case reasonDeadlineExceeded, reasonBackoffLimitExceeded, reasonWorkersBelowMinimum:
		return true
	}
	return false
}

// cleansRunningPods tells whether a finished job deletes its running pods.
func cleansRunningPods(job *kubeflow.MPIJob) bool {
	return *job.Spec.CleanPodPolicy != common.CleanPodPolicyNone || stopsAllPods(job)
}

// podsToClean lists the pods of a finished job to delete.
func podsToClean(job *kubeflow.MPIJob, launcher *corev1.Pod, workers []*corev1.Pod) []*corev1.Pod {
	policy := *job.Spec.CleanPodPolicy
	stopAll := stopsAllPods(job)
	active := func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodPending || p.Status.Phase == ""
	}
	var out []*corev1.Pod
	for _, p := range workers {
		if p.DeletionTimestamp != nil {
			continue
		}
		if policy == common.CleanPodPolicyAll || ((stopAll || policy == common.CleanPodPolicyRunning) && active(p)) {
			out = append(out, p)
		}
	}
	// A finished launcher stays for its logs; one still running is stopped
	// when the job is stopped or its pods are cleaned up.
	if launcher != nil && launcher.DeletionTimestamp == nil && active(launcher) && cleansRunningPods(job) {
		out = append(out, launcher)
	}
	return out
}

// checkTTL deletes a finished job whose ttlSecondsAfterFinished has passed;
// its children go with it through their owner references.
func (c *MPIJobController) checkTTL(ctx context.Context, job *kubeflow.MPIJob, now metav1.Time) (time.Duration, error) {
	rp := job.Spec.RunPolicy
	if rp == nil || rp.TTLSecondsAfterFinished == nil || job.Status.CompletionTime == nil {
		return 0, nil
	}
	expiry := job.Status.CompletionTime.Add(time.Duration(*rp.TTLSecondsAfterFinished) * time.Second)
	if left := expiry.Sub(now.Time); left > 0 {
		return left, nil
	}
	uid := job.UID
	err := c.mpiClient.KubeflowV1().MPIJobs(job.Namespace).Delete(ctx, job.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("deleting MPIJob after its TTL: %w", err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted MPIJob after its TTL")
	c.Recorder.Eventf(job, corev1.EventTypeNormal, eventTTLExpired, "Deleted MPIJob %s/%s %ds after it finished", job.Namespace, job.Name, *rp.TTLSecondsAfterFinished)
	return 0, nil
}
