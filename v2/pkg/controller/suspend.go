package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/kubeflow/mpi-operator/pkg/reconcile"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// Suspension is how Kueue admits jobs: it creates them suspended, and
// resumes them once it has found them room, after writing the node
// selectors, tolerations and the like of the room into the job's pod
// templates; it suspends them again to preempt them. A suspended job has
// no pods: its launcher Job is suspended first, as the upstream operator
// does, so that the Job controller deletes the launcher's pod and mpirun
// stops before its hosts go; once that write went through, its workers are
// deleted (discover_hosts.sh is emptied first) and its PodGroup is deleted.
// A job created suspended gets no pods and no launcher Job at all.

// The messages of the Suspended condition, the upstream operator's word for
// word, as are the other conditions' (Running's while suspended is
// "MPIJob <ns>/<name> is suspended."): a condition whose message changes is
// rewritten and announced, so a job that upstream's operator suspended or
// resumed would otherwise get a new Suspended condition, and its event
// again, from the takeover alone.
const (
	messageSuspended = "MPIJob suspended"
	messageResumed   = "MPIJob resumed"
)

// reconcileSuspended stops a suspended job and records it.
func (c *MPIJobController) reconcileSuspended(ctx context.Context, job *v2beta1.MPIJob, launcher *batchv1.Job, pods []*corev1.Pod, seen reconcile.Seen, now metav1.Time) (time.Duration, error) {
	// Suspended goes last, where kubectl's State column (the last
	// condition) shows it.
	setCondition(&job.Status, v2beta1.JobRunning, corev1.ConditionFalse, reasonSuspended,
		fmt.Sprintf("MPIJob %s/%s is suspended.", job.Namespace, job.Name), now)
	setCondition(&job.Status, v2beta1.JobSuspended, corev1.ConditionTrue, reasonSuspended, messageSuspended, now)
	removeCondition(&job.Status, conditionResizing)
	job.Status.StartTime = nil

	var live []*corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	if err := c.suspendLauncher(ctx, job, launcher); err != nil {
		return 0, err
	}
	requeue, err := c.stopWorkers(ctx, job, live, seen)
	if err != nil {
		return 0, err
	}
	return requeue, c.deletePodGroup(ctx, job)
}

// markResumed records that a job no longer suspended runs again: it starts
// anew, so its start time is now.
func markResumed(job *v2beta1.MPIJob, now metav1.Time) {
	if conditions.Has(job.Status.Conditions, v2beta1.JobSuspended) {
		setCondition(&job.Status, v2beta1.JobSuspended, corev1.ConditionFalse, reasonResumed, messageResumed, now)
		job.Status.StartTime = &now
	}
	if job.Status.StartTime == nil {
		job.Status.StartTime = &now
	}
}

// suspendLauncher suspends the launcher Job, if there is one that runs.
func (c *MPIJobController) suspendLauncher(ctx context.Context, job *v2beta1.MPIJob, launcher *batchv1.Job) error {
	if launcher == nil || isSuspended(launcher) || jobFinished(launcher) {
		return nil
	}
	suspended := launcher.DeepCopy()
	suspended.Spec.Suspend = ptr(true)
	if _, err := c.kube.BatchV1().Jobs(job.Namespace).Update(ctx, suspended, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("suspending launcher Job %s: %w", launcher.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Suspended the launcher Job", "job", klog.KObj(launcher))
	return nil
}

// resumeLauncher unsuspends the launcher Job in the request that brings its
// pod template's scheduling directives in line with the job's: Kueue
// changes the job's while it is suspended, to place it where it admitted
// it. The API server allows those fields to change only while the Job is
// suspended and has no status.startTime; a launcher that ran before its
// suspension still has one, which is cleared first, as Kueue does for the
// Jobs it manages.
func (c *MPIJobController) resumeLauncher(ctx context.Context, job *v2beta1.MPIJob, launcher *batchv1.Job) (*batchv1.Job, error) {
	want := newLauncherJob(job, c.gang).Spec.Template
	resumed := launcher.DeepCopy()
	tmpl := &resumed.Spec.Template
	tmpl.Spec.NodeSelector = want.Spec.NodeSelector
	tmpl.Spec.Tolerations = want.Spec.Tolerations
	tmpl.Spec.Affinity = want.Spec.Affinity
	tmpl.Spec.SchedulingGates = want.Spec.SchedulingGates
	tmpl.Labels = withJobControllerLabels(want.Labels, launcher)
	tmpl.Annotations = want.Annotations
	if launcher.Status.StartTime != nil && !equality.Semantic.DeepEqual(tmpl, &launcher.Spec.Template) {
		cleared, err := c.clearStartTime(ctx, launcher)
		if err != nil {
			return launcher, err
		}
		resumed.ResourceVersion = cleared.ResourceVersion
		resumed.Status = cleared.Status
	}
	resumed.Spec.Suspend = ptr(false)
	updated, err := c.kube.BatchV1().Jobs(job.Namespace).Update(ctx, resumed, metav1.UpdateOptions{})
	if err != nil {
		return launcher, fmt.Errorf("resuming launcher Job %s: %w", launcher.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Resumed the launcher Job", "job", klog.KObj(launcher))
	return updated, nil
}

// clearStartTime removes the start time of a suspended launcher Job, so
// that its pod template's scheduling directives may change.
func (c *MPIJobController) clearStartTime(ctx context.Context, launcher *batchv1.Job) (*batchv1.Job, error) {
	cleared := launcher.DeepCopy()
	cleared.Status.StartTime = nil
	updated, err := c.kube.BatchV1().Jobs(launcher.Namespace).UpdateStatus(ctx, cleared, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("clearing the start time of launcher Job %s: %w", launcher.Name, err)
	}
	return updated, nil
}

// withJobControllerLabels adds to labels the ones the API server gave the
// launcher Job's pod template, which its selector matches and which must
// stay.
func withJobControllerLabels(labels map[string]string, launcher *batchv1.Job) map[string]string {
	out := make(map[string]string, len(labels))
	for k, v := range launcher.Spec.Template.Labels {
		if strings.HasPrefix(k, "batch.kubernetes.io/") || k == "controller-uid" || k == "job-name" {
			out[k] = v
		}
	}
	if sel := launcher.Spec.Selector; sel != nil {
		for k, v := range sel.MatchLabels {
			out[k] = v
		}
	}
	for k, v := range labels {
		out[k] = v
	}
	return out
}

func isSuspended(lj *batchv1.Job) bool { return lj.Spec.Suspend != nil && *lj.Spec.Suspend }

// jobFinished tells whether a Job has completed or failed, or is about to.
func jobFinished(lj *batchv1.Job) bool {
	cond, _ := launcherEnd(lj)
	return cond != nil
}
