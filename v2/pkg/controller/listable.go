package controller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// Horovod and mpirun reach a host by its DNS name, which exists once an
// EndpointSlice of the headless Service that the pod's spec.subdomain names
// holds an endpoint for the pod with the pod's hostname. Before that an SSH
// attempt fails, and Horovod blacklists the host for good: a Running worker
// is listed in discover_hosts.sh only once its name resolves. The Service
// publishes addresses that are not ready, so this takes the time the
// EndpointSlice controller needs once the pod has an IP, not a readiness
// probe's.

// resolvable is the set of pods whose names resolve, built once per sync.
type resolvable map[types.UID]string // pod UID -> the hostname it resolves by

// resolvableWorkers collects the endpoints that give the job's workers
// their names, from the slices of every Service that a worker's subdomain
// names: the job's, and that of an older operator for pods it started.
func (c *MPIJobController) resolvableWorkers(job *v2beta1.MPIJob, pods []*corev1.Pod) resolvable {
	out := resolvable{}
	seen := map[string]bool{}
	for _, p := range pods {
		svc := subdomainOf(job, p)
		if seen[svc] {
			continue
		}
		seen[svc] = true
		objs, err := c.sliceIndexer.ByIndex(byServiceName, job.Namespace+"/"+svc)
		if err != nil {
			continue
		}
		for _, o := range objs {
			if s := asPublished(o); s != nil {
				out.add(s)
			}
		}
	}
	return out
}

// add records the pods that the slice names.
func (r resolvable) add(s *publishedNames) {
	for _, p := range s.Pods {
		r[p.UID] = p.Host
	}
}

// listable tells whether a worker's name resolves to it: an endpoint for
// the very pod (not an earlier one of the same name) has its name.
func (r resolvable) listable(w elastic.Worker) bool {
	host, ok := r[w.Pod.UID]
	return ok && host == w.Pod.Name
}

// subdomainOf is the Service under which a pod's name resolves: its own
// spec.subdomain, else the job's Service.
func subdomainOf(job *v2beta1.MPIJob, pod *corev1.Pod) string {
	if pod.Spec.Subdomain != "" {
		return pod.Spec.Subdomain
	}
	return serviceName(job)
}

// subdomains maps the workers whose subdomain is not the job's Service to
// their own, for the host names in the files.
func subdomains(job *v2beta1.MPIJob, pods []*corev1.Pod) map[string]string {
	var out map[string]string
	for _, p := range pods {
		if sub := subdomainOf(job, p); sub != serviceName(job) {
			if out == nil {
				out = map[string]string{}
			}
			out[p.Name] = sub
		}
	}
	return out
}
