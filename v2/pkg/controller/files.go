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
// the caller's decision. subdomains maps the name of a pod whose DNS
// subdomain is not the job's Service to its own (see hostName); nil for
// none. annotations, the caller's bookkeeping, are copied onto the
// ConfigMap.
func newConfigMap(job *v2beta1.MPIJob, hostfileWorkers, discoverWorkers []string, subdomains map[string]string,
	clusterDomain string, annotations map[string]string) *corev1.ConfigMap {
	names := hostNames{job: job, subdomains: subdomains, clusterDomain: clusterDomain}
	cm := &corev1.ConfigMap{
		ObjectMeta: childMeta(job, configMapName(job)),
		Data: map[string]string{
			hostfileKey:      hostfile(job, names.of(hostfileWorkers)),
			discoverHostsKey: discoverHostsScript(names.of(discoverWorkers)),
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
func hostfile(job *v2beta1.MPIJob, hosts []string) string {
	format := "%s slots=%d\n"
	switch job.Spec.MPIImplementation {
	case v2beta1.MPIImplementationIntel, v2beta1.MPIImplementationMPICH:
		format = "%s:%d\n"
	}
	var b strings.Builder
	for _, host := range hosts {
		fmt.Fprintf(&b, format, host, *job.Spec.SlotsPerWorker)
	}
	return b.String()
}

// discoverHostsScript is Horovod's host discovery script: it prints a host
// a line, without slots, which Horovod's --slots-per-host supplies.
func discoverHostsScript(hosts []string) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	for _, host := range hosts {
		fmt.Fprintf(&b, "echo %s\n", host)
	}
	return b.String()
}

// hostNames names the hosts of a job's files.
type hostNames struct {
	job *v2beta1.MPIJob
	// subdomains are the pods whose DNS subdomain is not the job's Service:
	// pods adopted from an operator that named the Service otherwise.
	subdomains    map[string]string
	clusterDomain string
}

// of returns the host names of the given workers, after the launcher's
// when it runs as a worker: the launcher is always up while its files are
// read, so it leads both lists.
func (n hostNames) of(workers []string) []string {
	hosts := make([]string, 0, len(workers)+1)
	if *n.job.Spec.RunLauncherAsWorker {
		hosts = append(hosts, n.name(launcherName(n.job)))
	}
	for _, w := range workers {
		hosts = append(hosts, n.name(w))
	}
	return hosts
}

// name is the DNS name that the pod's subdomain gives it:
// <pod>.<subdomain>.<namespace>.svc, and .<clusterDomain> when the operator
// was told the cluster's domain; without it the pods' DNS search path
// completes the name. The subdomain is the job's Service unless subdomains
// names another for the pod: each pod resolves under the Service its own
// spec names, so pods started by an older operator stay reachable.
func (n hostNames) name(pod string) string {
	sub, ok := n.subdomains[pod]
	if !ok || sub == "" {
		sub = serviceName(n.job)
	}
	name := pod + "." + sub + "." + n.job.Namespace + ".svc"
	if n.clusterDomain != "" {
		name += "." + n.clusterDomain
	}
	return name
}
