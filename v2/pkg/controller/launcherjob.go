package controller

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/metrics"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// syncLauncher creates the launcher Job once the job may start, and
// resumes a suspended one. It returns the launcher Job, nil while there is
// none.
func (c *MPIJobController) syncLauncher(ctx context.Context, job *v2beta1.MPIJob, launcher *batchv1.Job, out workerOutcome) (*batchv1.Job, error) {
	if launcher == nil {
		if !mayStartLauncher(job, out) {
			return nil, nil
		}
		created, err := reconcile.Ensure(ctx, owner(job), c.launcherChild(), newLauncherJob(job, c.gang))
		if err != nil {
			return nil, err
		}
		metrics.JobInfo.WithLabelValues(launcherName(job), job.Namespace).Set(1)
		return created, nil
	}
	metrics.JobInfo.WithLabelValues(launcherName(job), job.Namespace).Set(1)
	if isSuspended(launcher) {
		return c.resumeLauncher(ctx, job, launcher)
	}
	return launcher, nil
}

// mayStartLauncher tells whether the launcher Job may be created: the
// workers' writes are in the cache (so the plan was carried out), no
// worker's name is held by a pod of someone else's (mpirun would start
// ranks there), the files exist, and, with WaitForWorkersReady, enough
// workers are Ready: all of them, or an elastic job's minimum.
func mayStartLauncher(job *v2beta1.MPIJob, out workerOutcome) bool {
	if !out.settled || len(out.plan.InTheWay) > 0 || out.files == nil {
		return false
	}
	if job.Spec.LauncherCreationPolicy != v2beta1.LauncherCreationPolicyWaitForWorkersReady {
		return true
	}
	ready := 0
	for _, w := range out.workers {
		if w.Live() && podReady(w.Pod) {
			ready++
		}
	}
	return ready >= neededWorkers(job)
}

// neededWorkers is how many workers the job must have to run: all of them,
// or an elastic job's minimum.
func neededWorkers(job *v2beta1.MPIJob) int {
	if ep := job.Spec.ElasticPolicy; ep != nil {
		return int(*ep.MinReplicas)
	}
	return int(workerReplicas(job))
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// refreshLauncherPods tells each pod of the launcher Job of script, the
// discover_hosts.sh just written (engine.RefreshLauncher). The pods of a
// suspended launcher Job are on their way out: they are told nothing.
func (c *MPIJobController) refreshLauncherPods(ctx context.Context, job *v2beta1.MPIJob, launcher *batchv1.Job, script string) error {
	if !c.cfg.RefreshLauncher || launcher == nil || isSuspended(launcher) {
		return nil
	}
	pods, err := c.podsOf(launcher.UID, launcherSelector(job))
	if err != nil {
		return err
	}
	for _, p := range pods {
		if _, err := c.Engine.RefreshLauncher(ctx, jobKey(job), p, script); err != nil {
			return err
		}
	}
	return nil
}

// updateProgress keeps the conditions of a running job: Running once a
// launcher pod runs with enough workers, and for an elastic job Resizing
// while its workers have not reached what it asks for.
//
// Running, once True, stays True while the launcher Job replaces a failed
// pod, as with the upstream operator, which never sets Restarting: Kueue
// derives a workload's PodsReady from Running, and would otherwise count a
// retry of the launcher as a job that lost its pods. The retries show in
// the Launcher replica status' failed count.
func (c *MPIJobController) updateProgress(job *v2beta1.MPIJob, launcher *batchv1.Job, out workerOutcome, now metav1.Time) {
	if launcher != nil && !isSuspended(launcher) && c.launcherRunning(job, launcher) &&
		elastic.CountRunning(out.workers) >= neededWorkers(job) {
		setCondition(&job.Status, v2beta1.JobRunning, corev1.ConditionTrue, reconcile.ReasonRunning,
			fmt.Sprintf("MPIJob %s/%s is running.", job.Namespace, job.Name), now)
	}
	if job.Spec.ElasticPolicy == nil || !conditions.Has(job.Status.Conditions, v2beta1.JobRunning) || elastic.Settled(out.spec, out.workers, out.plan) {
		removeCondition(&job.Status, conditionResizing)
		return
	}
	setCondition(&job.Status, conditionResizing, corev1.ConditionTrue, reasonResizing,
		fmt.Sprintf("MPIJob %s/%s is resizing to %d worker(s).", job.Namespace, job.Name, workerReplicas(job)), now)
}

// launcherRunning tells whether a pod of the launcher Job runs.
func (c *MPIJobController) launcherRunning(job *v2beta1.MPIJob, launcher *batchv1.Job) bool {
	pods, _ := c.podsOf(launcher.UID, launcherSelector(job))
	for _, p := range pods {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			return true
		}
	}
	return false
}
