package controller

import (
	"strconv"
	"strings"

	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
)

// Names, labels and paths that running jobs and the upstream operator share
// with this one; changing any of them breaks in-place upgrades.
const (
	labelGroupName    = "group-name"
	labelMPIJobName   = "mpi-job-name"
	labelMPIRole      = "mpi-job-role"
	labelReplicaIndex = "replica-index"
	labelApp          = "app"

	roleLauncher = "launcher"
	roleWorker   = "worker"

	configSuffix   = "-config"
	launcherSuffix = "-launcher"
	workerInfix    = "-worker-"

	configVolumeName  = "mpi-job-config"
	kubectlVolumeName = "mpi-job-kubectl"
	configMountPath   = "/etc/mpi"
	kubectlMountPath  = "/opt/kube"

	hostfileKey      = elastic.HostfileKey
	kubexecKey       = "kubexec.sh"
	discoverHostsKey = "discover_hosts.sh"

	kubectlDeliveryName = "kubectl-delivery"
)

// annotationVolcanoGroup ties a pod to its volcano PodGroup. The elastic
// machinery's annotations are package elastic's.
const annotationVolcanoGroup = "scheduling.k8s.io/group-name"

func configMapName(job *kubeflow.MPIJob) string { return job.Name + configSuffix }
func launcherName(job *kubeflow.MPIJob) string  { return job.Name + launcherSuffix }
func workerName(job *kubeflow.MPIJob, index int) string {
	return job.Name + workerInfix + strconv.Itoa(index)
}

// workerNamer is workerName for one job, in the form package elastic takes.
func workerNamer(job *kubeflow.MPIJob) func(int) string {
	return func(i int) string { return workerName(job, i) }
}

// podLabels are the labels every pod of the job carries besides its
// template's.
func podLabels(job *kubeflow.MPIJob, role string) map[string]string {
	return map[string]string{
		labelGroupName:  kubeflow.GroupName,
		labelMPIJobName: job.Name,
		labelMPIRole:    role,
	}
}

// workerSelector selects the job's workers in its namespace.
func workerSelector(job *kubeflow.MPIJob) labels.Selector {
	return labels.SelectorFromSet(podLabels(job, roleWorker))
}

// workerIndex tells a worker's index from its labels, either key, or else
// from its name's numeric suffix. ok is false for a pod that has none.
func workerIndex(job *kubeflow.MPIJob, pod *corev1.Pod) (index int, ok bool) {
	return workerIndexOf(job.Name, pod.Name, pod.Labels)
}

// workerIndexOf is workerIndex for the worker podName of the job jobName
// with podLabels.
func workerIndexOf(jobName, podName string, podLabels map[string]string) (index int, ok bool) {
	for _, key := range []string{labelReplicaIndex, common.ReplicaIndexLabel} {
		if v, found := podLabels[key]; found {
			if i, ok := elastic.ParseIndex(v); ok {
				return i, true
			}
		}
	}
	suffix, found := strings.CutPrefix(podName, jobName+workerInfix)
	if !found {
		return 0, false
	}
	return elastic.ParseIndex(suffix)
}
