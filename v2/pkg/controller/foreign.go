package controller

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// A worker's name is its host name, which discover_hosts.sh and the
// hostfile hand to mpirun and Horovod: a pod of someone else's that holds it
// (a bare pod, a StatefulSet's, another operator's) would receive the job's
// ranks over SSH. The planner skips such names: an elastic job takes its
// next unused index instead, and a fixed job, whose workers have fixed
// names, is Blocked until the name is free, and gets no launcher meanwhile.
// Between them the two pod caches see every pod of the namespace: the
// operator's own through the typed cache, every other through a cache of
// their metadata.

// nameHolder tells whether a pod that job does not control holds name.
func (c *MPIJobController) nameHolder(job *v2beta1.MPIJob, name string) elastic.Holder {
	holder := c.podByName(job.Namespace, name)
	if holder == nil || metav1.IsControlledBy(holder, job) {
		return elastic.NameFree
	}
	if holder.GetDeletionTimestamp() != nil {
		return elastic.NameLeaving
	}
	return elastic.NameHeld
}

// podByName is the metadata of the pod called name in namespace, from
// whichever cache holds it; nil when neither does.
func (c *MPIJobController) podByName(namespace, name string) metav1.Object {
	if pod, err := c.podLister.Pods(namespace).Get(name); err == nil {
		return pod
	}
	obj, err := c.otherPods.ByNamespace(namespace).Get(name)
	if err != nil {
		return nil
	}
	m, _ := obj.(metav1.Object)
	return m
}

// holderOf is nameHolder for the worker of each index, as the planner asks.
func (c *MPIJobController) holderOf(job *v2beta1.MPIJob) func(int) elastic.Holder {
	return func(i int) elastic.Holder { return c.nameHolder(job, workerName(job, i)) }
}

// jobOfWorkerName is the name of the job whose worker would be called pod,
// if any job's would.
func jobOfWorkerName(pod string) (string, bool) {
	at := strings.LastIndex(pod, workerInfix)
	if at <= 0 {
		return "", false
	}
	if _, ok := parseIndex(pod[at+len(workerInfix):]); !ok {
		return "", false
	}
	return pod[:at], true
}
