package controller

import (
	"context"
	"fmt"
	"strings"

	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/engine"
	"github.com/kubeflow/mpi-operator/pkg/metrics"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// checkLauncherOutcome records in the job's status what a launcher that
// has ended or restarts too often means for the job. It reports whether
// the job has finished.
func (c *MPIJobController) checkLauncherOutcome(job *kubeflow.MPIJob, launcher *corev1.Pod, now metav1.Time) bool {
	if launcher == nil || launcher.DeletionTimestamp != nil {
		return false
	}
	spec := job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher]
	limit := backoffLimit(job)
	switch launcher.Status.Phase {
	case corev1.PodSucceeded:
		msg := fmt.Sprintf("MPIJob %s/%s successfully completed.", job.Namespace, job.Name)
		if setCondition(&job.Status, common.JobSucceeded, reconcile.ReasonSucceeded, msg, now) {
			job.Status.CompletionTime = &now
		}
		return true
	case corev1.PodFailed:
		return c.launcherFailed(job, launcher, spec, limit, now)
	}
	if limit != nil && spec.RestartPolicy != common.RestartPolicyNever && spec.RestartPolicy != common.RestartPolicyExitCode {
		if restarts := containerRestarts(launcher); restarts > *limit {
			msg := fmt.Sprintf("MPIJob %s/%s has failed: its launcher restarted %d times, more than backoffLimit %d.",
				job.Namespace, job.Name, restarts, *limit)
			c.failJob(job, reasonBackoffLimitExceeded, msg, now)
			return true
		}
	}
	return false
}

// launcherFailed restarts a failed launcher when it may be restarted and
// the backoff limit is not reached, and fails the job otherwise. An evicted
// launcher is restarted whatever its restart policy, as the upstream
// operator did: the eviction was the node's doing, not the program's. With
// ExitCode, an exit code of 128 or more (killed by a signal) restarts it.
//
// A restart is recorded before the pod goes, as the Job controller records
// a failure before it acts: this sync counts the failure and sets the
// Restarting condition, naming the pod's UID; the sync that sees that status
// in the cache deletes the pod (launcherRestartRecorded), and the next one
// creates a new launcher. A status write that is lost or conflicts thus
// never leaves a deleted launcher uncounted, and backoffLimit holds.
func (c *MPIJobController) launcherFailed(job *kubeflow.MPIJob, launcher *corev1.Pod,
	spec *common.ReplicaSpec, limit *int32, now metav1.Time) bool {
	rs := replicaStatus(&job.Status, kubeflow.MPIReplicaTypeLauncher)
	if launcherRestartRecorded(job, launcher) {
		return false
	}
	evicted := launcher.Status.Reason == engine.PodEvicted
	code, exited := exitCode(job, launcher)
	restartable := evicted || (spec.RestartPolicy == common.RestartPolicyExitCode && exited && code >= 128)
	if restartable && (limit == nil || rs.Failed < *limit) {
		rs.Failed++
		reason, why := reasonRestarting, fmt.Sprintf("failure %d", rs.Failed)
		if evicted {
			reason, why = reconcile.ReasonEvicted, fmt.Sprintf("eviction (failure %d)", rs.Failed)
		}
		msg := fmt.Sprintf("MPIJob %s/%s is restarting its launcher after %s %s.", job.Namespace, job.Name, why, launcherTag(launcher))
		setCondition(&job.Status, common.JobRestarting, reason, msg, now)
		return false
	}
	reason, msg := reconcile.ReasonFailed, fmt.Sprintf("MPIJob %s/%s has failed", job.Namespace, job.Name)
	switch {
	case restartable:
		reason = reasonBackoffLimitExceeded
		msg += fmt.Sprintf(": its launcher failed %d times, backoffLimit is %d", rs.Failed+1, *limit)
	case exited:
		msg += fmt.Sprintf(": its launcher exited with code %d", code)
	}
	if c.failJob(job, reason, msg+".", now) {
		rs.Failed++
	}
	return true
}

// launcherTag names a launcher pod in the Restarting condition's message.
func launcherTag(launcher *corev1.Pod) string {
	return fmt.Sprintf("(launcher pod uid %s)", launcher.UID)
}

// launcherRestartRecorded tells whether the status already records the
// restart of this failed launcher: its failure is counted, and the pod may
// go.
func launcherRestartRecorded(job *kubeflow.MPIJob, launcher *corev1.Pod) bool {
	if launcher == nil || launcher.DeletionTimestamp != nil || launcher.Status.Phase != corev1.PodFailed {
		return false
	}
	cond := conditions.Find(job.Status.Conditions, common.JobRestarting)
	return cond != nil && cond.Status == corev1.ConditionTrue && strings.Contains(cond.Message, launcherTag(launcher))
}

func backoffLimit(job *kubeflow.MPIJob) *int32 {
	if rp := job.Spec.RunPolicy; rp != nil {
		return rp.BackoffLimit
	}
	return nil
}

func containerRestarts(pod *corev1.Pod) int32 {
	var n int32
	for _, s := range pod.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

// exitCode is the exit code of the launcher's main container, if it ended.
func exitCode(job *kubeflow.MPIJob, pod *corev1.Pod) (int32, bool) {
	spec := job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher]
	main := spec.Template.Spec.Containers[mainContainerIndex(job, &spec.Template.Spec)].Name
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == main && s.State.Terminated != nil {
			return s.State.Terminated.ExitCode, true
		}
	}
	return 0, false
}

// createLauncher creates the launcher, with the hash of the
// discover_hosts.sh it starts with, once the rest is in place.
func (c *MPIJobController) createLauncher(ctx context.Context, job *kubeflow.MPIJob, hash string) error {
	metrics.JobInfo.WithLabelValues(launcherName(job), job.Namespace).Set(1)
	opts := launcherOptions{
		deliveryImage:   c.cfg.KubectlDeliveryImage,
		gangScheduler:   c.cfg.GangSchedulerName,
		minReadyWorkers: minReadyWorkers(job),
		hostsHash:       hash,
	}
	created, err := c.Pods.Create(ctx, owner(job), newLauncher(job, opts))
	if err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Created launcher", "pod", klog.KObj(created))
	return nil
}

// minReadyWorkers is how many workers the launcher waits for before it
// starts: all of them, or an elastic job's minimum.
func minReadyWorkers(job *kubeflow.MPIJob) int32 {
	if ep := job.Spec.ElasticPolicy; ep != nil && ep.MinReplicas != nil {
		return *ep.MinReplicas
	}
	return int32(desiredWorkers(job))
}

// updateRunning marks the job Running once its launcher runs with enough
// workers: all of them, or an elastic job's minimum.
func (c *MPIJobController) updateRunning(job *kubeflow.MPIJob, launcher *corev1.Pod, ws []elastic.Worker, now metav1.Time) {
	if launcher == nil || launcher.Status.Phase != corev1.PodRunning || launcher.DeletionTimestamp != nil {
		return
	}
	if int32(elastic.CountRunning(ws)) < minReadyWorkers(job) {
		return
	}
	msg := fmt.Sprintf("MPIJob %s/%s is running.", job.Namespace, job.Name)
	setCondition(&job.Status, common.JobRunning, reconcile.ReasonRunning, msg, now)
}
