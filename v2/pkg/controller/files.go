package controller

import (
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// newConfigMap returns the job's /etc/mpi files: the hostfile lists
// hostfileWorkers, the workers the job wants, and discover_hosts.sh lists
// discoverWorkers, the Running workers the launcher may use now. Both are
// pod names, written in the order given; which workers go in each list is
// the caller's decision. annotations, the caller's bookkeeping, are copied
// onto the ConfigMap.
func newConfigMap(job *v2beta1.MPIJob, hostfileWorkers, discoverWorkers []string, clusterDomain string, annotations map[string]string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		ObjectMeta: childMeta(job, configMapName(job)),
		Data: map[string]string{
			hostfileKey:      hostfile(job, hostfileWorkers, clusterDomain),
			discoverHostsKey: discoverHostsScript(job, discoverWorkers, clusterDomain),
		},
	}
	if len(annotations) > 0 {
		cm.Annotations = maps.Clone(annotations)
	}
	return cm
}

// hostfile has a line per host with its slots, in the implementation's
// format: OpenMPI's "<host> slots=<n>", Intel MPI's and MPICH's
// "<host>:<n>".
func hostfile(job *v2beta1.MPIJob, workers []string, clusterDomain string) string {
	format := "%s slots=%d\n"
	switch job.Spec.MPIImplementation {
	case v2beta1.MPIImplementationIntel, v2beta1.MPIImplementationMPICH:
		format = "%s:%d\n"
	}
	var b strings.Builder
	for _, host := range jobHosts(job, workers, clusterDomain) {
		fmt.Fprintf(&b, format, host, *job.Spec.SlotsPerWorker)
	}
	return b.String()
}

// discoverHostsScript is Horovod's host discovery script: it prints a host
// a line, without slots, which Horovod's --slots-per-host supplies.
func discoverHostsScript(job *v2beta1.MPIJob, workers []string, clusterDomain string) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	for _, host := range jobHosts(job, workers, clusterDomain) {
		fmt.Fprintf(&b, "echo %s\n", host)
	}
	return b.String()
}

// jobHosts are the host names of the given workers, after the launcher's
// when it runs as a worker: the launcher is always up while its files are
// read, so it leads both lists.
func jobHosts(job *v2beta1.MPIJob, workers []string, clusterDomain string) []string {
	hosts := make([]string, 0, len(workers)+1)
	if *job.Spec.RunLauncherAsWorker {
		hosts = append(hosts, hostName(job, launcherName(job), clusterDomain))
	}
	for _, w := range workers {
		hosts = append(hosts, hostName(job, w, clusterDomain))
	}
	return hosts
}

// hostName is the DNS name the job's Service gives the pod:
// <pod>.<job>.<namespace>.svc, and .<clusterDomain> when the operator was
// told the cluster's domain; without it the pods' DNS search path completes
// the name.
func hostName(job *v2beta1.MPIJob, pod, clusterDomain string) string {
	name := pod + "." + serviceName(job) + "." + job.Namespace + ".svc"
	if clusterDomain != "" {
		name += "." + clusterDomain
	}
	return name
}
