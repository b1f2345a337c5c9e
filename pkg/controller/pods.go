package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/engine"
	"github.com/kubeflow/mpi-operator/pkg/metrics"
)

// eventDeletingPods is the reason of the event of a finished job's pods
// being deleted; the workers' own events are the engine's.
const eventDeletingPods = "DeletingPods"

// engineJob is what the engine knows of job.
func engineJob(job *kubeflow.MPIJob, now time.Time) engine.Job {
	return engine.Job{
		Owner:       owner(job),
		UID:         job.UID,
		Generation:  job.Generation,
		Replicas:    desiredWorkers(job),
		Elastic:     job.Spec.ElasticPolicy != nil,
		DrainPeriod: drainPeriod(job),
		WorkerName:  workerNamer(job),
		Now:         now,
	}
}

// hooks are how the engine acts on job: the files, with
// belowMinSince in their bookkeeping; the launcher, if *launcher is set,
// told of each script written (and *launcher the pod as it is then); the
// workers built; the events recorded.
func (c *MPIJobController) hooks(job *kubeflow.MPIJob, launcher **corev1.Pod, belowMinSince time.Time) engine.Hooks {
	return engine.Hooks{
		Files: func(ctx context.Context, plan elastic.Plan) (string, error) {
			state := elastic.State{NextIndex: plan.NextIndex, BelowMinSince: belowMinSince}
			cm, err := c.syncConfigMap(ctx, job, plan.Hosts, state)
			if err != nil {
				return "", err
			}
			return cm.Data[discoverHostsKey], nil
		},
		Tell: func(ctx context.Context, script string) (err error) {
			if *launcher == nil {
				return nil
			}
			metrics.JobInfo.WithLabelValues(launcherName(job), job.Namespace).Set(1)
			if c.cfg.RefreshLauncher {
				*launcher, err = c.Engine.RefreshLauncher(ctx, jobKey(job), *launcher, script)
			}
			return err
		},
		Worker: func(i int) *corev1.Pod { return newWorker(job, i, c.cfg.GangSchedulerName) },
		Event:  func(eventType, reason, msg string) { c.Recorder.Event(job, eventType, reason, msg) },
	}
}

func jobKey(job *kubeflow.MPIJob) string { return job.Namespace + "/" + job.Name }
