package controller

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// Labels of the job's children. They are the ones the upstream operator
// writes, so that jobs it started, Kueue and users' selectors keep working.
const (
	// labelApp names the job on the children that are not pods.
	labelApp = "app"

	labelOperatorName = "training.kubeflow.org/operator-name"
	labelJobName      = "training.kubeflow.org/job-name"
	labelJobRole      = "training.kubeflow.org/job-role"
	labelReplicaIndex = "training.kubeflow.org/replica-index"

	operatorName = "mpi-operator"
	roleLauncher = "launcher"
	roleWorker   = "worker"
)

// Labels and annotations that tie a pod to its gang's PodGroup, read by the
// schedulers themselves.
const (
	// annotationVolcanoGroup is volcano's pod annotation.
	annotationVolcanoGroup = "scheduling.k8s.io/group-name"
	// annotationVolcanoQueue on the MPIJob names its volcano queue when the
	// scheduling policy does not.
	annotationVolcanoQueue = "scheduling.volcano.sh/queue-name"
	// labelSchedulerPluginsGroup is the coscheduling plugin's pod label.
	labelSchedulerPluginsGroup = "scheduling.x-k8s.io/pod-group"
)

// Name parts, volumes, files and variables of the job's children.
const (
	configSuffix   = "-config"
	sshAuthSuffix  = "-ssh"
	launcherSuffix = "-launcher"
	workerInfix    = "-worker-"

	configVolumeName  = "mpi-job-config"
	configMountPath   = "/etc/mpi"
	sshAuthVolumeName = "ssh-auth"

	hostfileKey      = "hostfile"
	discoverHostsKey = "discover_hosts.sh"
	sshPublicKeyKey  = "ssh-publickey"

	envJobRole = "K_MPI_JOB_ROLE"
)

// The names of the job's children. The Service's name is every pod's DNS
// subdomain; a pod's name is its host name.
func serviceName(job *v2beta1.MPIJob) string       { return job.Name }
func configMapName(job *v2beta1.MPIJob) string     { return job.Name + configSuffix }
func sshSecretName(job *v2beta1.MPIJob) string     { return job.Name + sshAuthSuffix }
func launcherName(job *v2beta1.MPIJob) string      { return job.Name + launcherSuffix }
func podGroupName(job *v2beta1.MPIJob) string      { return job.Name }
func workerName(job *v2beta1.MPIJob, i int) string { return job.Name + workerInfix + strconv.Itoa(i) }

// jobLabels are the labels every pod of the job carries, whatever its role.
func jobLabels(job *v2beta1.MPIJob) map[string]string {
	return map[string]string{
		labelOperatorName: operatorName,
		labelJobName:      job.Name,
	}
}

// podLabels are the labels every pod of the job carries in the given role,
// over its template's.
func podLabels(job *v2beta1.MPIJob, role string) map[string]string {
	l := jobLabels(job)
	l[labelJobRole] = role
	return l
}

// workerSelector selects the job's workers in its namespace.
func workerSelector(job *v2beta1.MPIJob) labels.Selector {
	return labels.SelectorFromSet(podLabels(job, roleWorker))
}

// launcherSelector selects the job's launcher pods in its namespace: the
// launcher Job's current pod and those it replaced.
func launcherSelector(job *v2beta1.MPIJob) labels.Selector {
	return labels.SelectorFromSet(podLabels(job, roleLauncher))
}

// workerIndex tells a worker's index from its name's suffix after
// "<job>-worker-". ok is false for a pod whose name is not in the form the
// controller writes. The replica-index label is not read: with the launcher
// as a worker it is the index plus one (see replicaIndexLabel), and pods
// that an older operator labelled otherwise keep their names.
func workerIndex(job *v2beta1.MPIJob, pod *corev1.Pod) (index int, ok bool) {
	return workerIndexOf(job, pod.Name)
}

// workerIndexOf is workerIndex for a pod of the name given.
func workerIndexOf(job *v2beta1.MPIJob, name string) (index int, ok bool) {
	suffix, found := strings.CutPrefix(name, job.Name+workerInfix)
	if !found {
		return 0, false
	}
	return parseIndex(suffix)
}

// replicaIndexLabel is the replica-index label of worker index, as the
// upstream operator writes it: the index, or, when the launcher runs as a
// worker and is labelled 0 itself, the index plus one, so that every pod of
// the job has an index of its own (Kueue's topology-aware scheduling asks
// for that).
func replicaIndexLabel(job *v2beta1.MPIJob, index int) string {
	if *job.Spec.RunLauncherAsWorker {
		index++
	}
	return strconv.Itoa(index)
}

// parseIndex accepts an index only in the form the controller writes it: a
// decimal number without sign, spaces or leading zeros, so that one index
// has one spelling and one pod name.
func parseIndex(s string) (int, bool) {
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 || strconv.Itoa(i) != s {
		return 0, false
	}
	return i, true
}
