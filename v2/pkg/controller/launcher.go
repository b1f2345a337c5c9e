package controller

import (
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// The MPI settings that point mpirun at the job's hostfile and make its SSH
// connections wait for workers whose names are not resolvable yet.
const (
	hostfilePath      = configMountPath + "/" + hostfileKey
	sshRetryArguments = "-o ConnectionAttempts=10"
)

// newLauncherJob returns the batch/v1 Job that runs the launcher: the
// runPolicy bounds its retries, run time and life after it finished, and it
// is suspended while the MPIJob is. The job must be valid: it has a
// Launcher template with a container.
//
// A replacement launcher pod starts only once its predecessor has stopped
// (podReplacementPolicy Failed): both would have the same host name, and a
// terminating launcher still running mpirun would share it with the new one.
func newLauncherJob(job *v2beta1.MPIJob, gang gangScheduler) *batchv1.Job {
	rp := &job.Spec.RunPolicy
	tmpl := newLauncherPodTemplate(job, gang)
	lj := &batchv1.Job{
		ObjectMeta: childMeta(job, launcherName(job)),
		Spec: batchv1.JobSpec{
			BackoffLimit:            clonePtr(rp.BackoffLimit),
			ActiveDeadlineSeconds:   clonePtr(rp.ActiveDeadlineSeconds),
			TTLSecondsAfterFinished: clonePtr(rp.TTLSecondsAfterFinished),
			Suspend:                 ptr(*rp.Suspend),
			PodReplacementPolicy:    ptr(batchv1.Failed),
			Template:                *tmpl,
		},
	}
	if job.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeLauncher].RestartPolicy == v2beta1.RestartPolicyExitCode {
		lj.Spec.PodFailurePolicy = exitCodeFailurePolicy(tmpl.Spec.Containers[0].Name)
	}
	return lj
}

// newLauncherPodTemplate is the Launcher template with the job's labels
// (and replica index 0 when it runs as a worker, as upstream's has), the
// host name <job>-launcher under the job's Service,
// the MPI environment, the SSH keys and the job's files at /etc/mpi.
func newLauncherPodTemplate(job *v2beta1.MPIJob, gang gangScheduler) *corev1.PodTemplateSpec {
	spec := job.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeLauncher]
	tmpl := newPodTemplate(job, v2beta1.MPIReplicaTypeLauncher, roleLauncher, gang)
	if *job.Spec.RunLauncherAsWorker {
		tmpl.Labels[labelReplicaIndex] = "0"
	}
	tmpl.Spec.Hostname = launcherName(job)
	tmpl.Spec.RestartPolicy = launcherRestartPolicy(spec.RestartPolicy)
	tmpl.Spec.Volumes = append(tmpl.Spec.Volumes, corev1.Volume{
		Name: configVolumeName,
		VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: configMapName(job)},
			Items: []corev1.KeyToPath{
				{Key: hostfileKey, Path: hostfileKey, Mode: ptr[int32](0o444)},
				{Key: discoverHostsKey, Path: discoverHostsKey, Mode: ptr[int32](0o555)},
			},
		}},
	})
	main := &tmpl.Spec.Containers[0]
	main.VolumeMounts = append(main.VolumeMounts, corev1.VolumeMount{Name: configVolumeName, MountPath: configMountPath})
	addEnv(main, launcherEnv(job)...)
	return tmpl
}

// launcherEnv is the launcher's environment: its role, its MPI
// implementation's settings, and, unless the launcher is a host itself, no
// GPUs, which the NVIDIA container runtime would otherwise expose to it
// on a GPU node whatever it requested.
func launcherEnv(job *v2beta1.MPIJob) []corev1.EnvVar {
	slots := strconv.Itoa(int(*job.Spec.SlotsPerWorker))
	env := []corev1.EnvVar{{Name: envJobRole, Value: roleLauncher}}
	switch job.Spec.MPIImplementation {
	case v2beta1.MPIImplementationOpenMPI:
		env = append(env,
			corev1.EnvVar{Name: "OMPI_MCA_orte_keep_fqdn_hostnames", Value: "true"},
			corev1.EnvVar{Name: "OMPI_MCA_orte_default_hostfile", Value: hostfilePath},
			corev1.EnvVar{Name: "OMPI_MCA_plm_rsh_args", Value: sshRetryArguments},
			corev1.EnvVar{Name: "OMPI_MCA_orte_set_default_slots", Value: slots},
		)
	case v2beta1.MPIImplementationIntel:
		env = append(env,
			corev1.EnvVar{Name: "I_MPI_HYDRA_HOST_FILE", Value: hostfilePath},
			corev1.EnvVar{Name: "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", Value: sshRetryArguments},
			corev1.EnvVar{Name: "I_MPI_PERHOST", Value: slots},
		)
	case v2beta1.MPIImplementationMPICH:
		env = append(env,
			corev1.EnvVar{Name: "HYDRA_HOST_FILE", Value: hostfilePath},
			corev1.EnvVar{Name: "HYDRA_LAUNCH_EXTRA_ARGS", Value: sshRetryArguments},
		)
	}
	if !*job.Spec.RunLauncherAsWorker {
		env = append(env,
			corev1.EnvVar{Name: "NVIDIA_VISIBLE_DEVICES"},
			corev1.EnvVar{Name: "NVIDIA_DRIVER_CAPABILITIES"},
		)
	}
	return env
}

// launcherRestartPolicy is the launcher pod's restart policy. A Job's pods
// may only be Never or OnFailure: Always, which for a launcher can only mean
// "again until it works", becomes OnFailure; ExitCode is Never, and the Job's
// pod failure policy decides on a retry.
func launcherRestartPolicy(p v2beta1.RestartPolicy) corev1.RestartPolicy {
	switch p {
	case v2beta1.RestartPolicyAlways, v2beta1.RestartPolicyOnFailure:
		return corev1.RestartPolicyOnFailure
	default:
		return corev1.RestartPolicyNever
	}
}

// Exit codes of the ExitCode restart policy, as the Kubeflow training
// operators define it: 1 to 127 are the program's own errors, which a retry
// would repeat; 128 and up are deaths by a signal (128+n: 137 for SIGKILL,
// the OOM killer's, 143 for SIGTERM), which a retry may outlive.
const (
	firstPermanentExitCode = 1
	lastPermanentExitCode  = 127
)

// exitCodeFailurePolicy carries out the ExitCode restart policy on the
// launcher Job: the job fails at once when the launcher's main container
// exits with a permanent error code; other failures count against
// backoffLimit and the Job retries. A pod disrupted by Kubernetes (evicted,
// preempted, its node drained) is retried without counting: no exit code of
// the program was involved.
func exitCodeFailurePolicy(mainContainer string) *batchv1.PodFailurePolicy {
	codes := make([]int32, 0, lastPermanentExitCode-firstPermanentExitCode+1)
	for c := int32(firstPermanentExitCode); c <= lastPermanentExitCode; c++ {
		codes = append(codes, c)
	}
	return &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		{
			Action: batchv1.PodFailurePolicyActionIgnore,
			OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{
				Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
			}},
		},
		{
			Action: batchv1.PodFailurePolicyActionFailJob,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
				ContainerName: ptr(mainContainer),
				Operator:      batchv1.PodFailurePolicyOnExitCodesOpIn,
				Values:        codes,
			},
		},
	}}
}
