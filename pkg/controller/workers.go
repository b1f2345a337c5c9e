package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
)

// The workers' life cycle and the plan of each sync are package elastic's;
// what the v1 API tells of them is read here.

// toWorkers parses the job's worker pods, dropping those without an index.
func toWorkers(job *kubeflow.MPIJob, pods []*corev1.Pod) []elastic.Worker {
	return elastic.ParseWorkers(pods, func(p *corev1.Pod) (int, bool) { return workerIndex(job, p) })
}

// workerSpec is what the planner needs to know of a defaulted job. It sets
// no Listable: a v1 job lists every live worker as soon as it runs.
func workerSpec(job *kubeflow.MPIJob) elastic.Spec {
	return elastic.Spec{
		Elastic:     job.Spec.ElasticPolicy != nil,
		Replicas:    desiredWorkers(job),
		DrainPeriod: drainPeriod(job),
		WorkerName:  workerNamer(job),
	}
}

// planSpec is workerSpec with the controller's bound on the job's workers
// and the workers listed now.
func (c *MPIJobController) planSpec(job *kubeflow.MPIJob, listed map[string]bool) elastic.Spec {
	spec := workerSpec(job)
	spec.MaxPods = c.maxWorkerPods()
	spec.Listed = listed
	return spec
}

func (c *MPIJobController) maxWorkerPods() int {
	if c.cfg.MaxWorkerPods > 0 {
		return c.cfg.MaxWorkerPods
	}
	return int(kubeflow.MaxWorkers)
}

func drainPeriod(job *kubeflow.MPIJob) time.Duration {
	if ep := job.Spec.ElasticPolicy; ep != nil && ep.DrainSeconds != nil {
		return time.Duration(*ep.DrainSeconds) * time.Second
	}
	return time.Duration(kubeflow.DefaultDrainSeconds) * time.Second
}

func desiredWorkers(job *kubeflow.MPIJob) int {
	if spec := job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker]; spec != nil && spec.Replicas != nil {
		return int(*spec.Replicas)
	}
	return 0
}
