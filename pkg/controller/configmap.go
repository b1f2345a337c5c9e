package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// syncConfigMap writes the job's /etc/mpi files and bookkeeping, if they
// changed. How often a job's files may be written is the
// engine's to say (engine.Pace).
func (c *MPIJobController) syncConfigMap(ctx context.Context, job *kubeflow.MPIJob, hosts elastic.Hosts, state elastic.State) (*corev1.ConfigMap, error) {
	return reconcile.Ensure(ctx, owner(job), c.configMapChild(job), newConfigMap(job, hosts, state))
}

// recordedState reads the bookkeeping from the job's ConfigMap, and the
// workers its discover_hosts.sh lists; nothing when there is none.
func (c *MPIJobController) recordedState(job *kubeflow.MPIJob) (elastic.State, map[string]bool) {
	cm, err := c.configMaps.Get(job.Namespace, configMapName(job))
	if err != nil || !metav1.IsControlledBy(cm, job) {
		return elastic.State{}, nil
	}
	return elastic.ParseState(cm.Annotations), elastic.ListedPods(cm.Data[discoverHostsKey])
}

// configMapChild is the job's ConfigMap as a child; an elastic job's hostfile that
// only gains hosts waits for the next write (elastic.MergeElasticFiles).
func (c *MPIJobController) configMapChild(job *kubeflow.MPIJob) reconcile.Child[*corev1.ConfigMap] {
	merge := elastic.MergeFiles
	if job.Spec.ElasticPolicy != nil {
		merge = elastic.MergeElasticFiles
	}
	return reconcile.ChildOf("ConfigMap", c.configMaps.Get,
		func(ns string) reconcile.TypedClient[*corev1.ConfigMap] { return c.kubeClient.CoreV1().ConfigMaps(ns) },
		merge).Remembering(c.configMaps)
}
