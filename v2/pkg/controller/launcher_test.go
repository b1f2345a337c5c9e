package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// testOpenMPIEnv is the launcher environment of newTestJob, with one slot
// per worker and no GPUs.
func testOpenMPIEnv() []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "K_MPI_JOB_ROLE", Value: "launcher"},
		{Name: "OMPI_MCA_orte_keep_fqdn_hostnames", Value: "true"},
		{Name: "OMPI_MCA_orte_default_hostfile", Value: "/etc/mpi/hostfile"},
		{Name: "OMPI_MCA_plm_rsh_args", Value: "-o ConnectionAttempts=10"},
		{Name: "OMPI_MCA_orte_set_default_slots", Value: "1"},
		{Name: "NVIDIA_VISIBLE_DEVICES"},
		{Name: "NVIDIA_DRIVER_CAPABILITIES"},
	}
}

// testLauncherJob is the launcher Job of newTestJob without a gang
// scheduler.
func testLauncherJob() *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: testChildMeta("job-launcher"),
		Spec: batchv1.JobSpec{
			Suspend:              ptr(false),
			PodReplacementPolicy: ptr(batchv1.Failed),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels: map[string]string{
						"app.kubernetes.io/name":              "trainer",
						"training.kubeflow.org/operator-name": "mpi-operator",
						"training.kubeflow.org/job-name":      "job",
						"training.kubeflow.org/job-role":      "launcher",
					},
					Annotations: map[string]string{"sidecar.istio.io/inject": "false"},
				},
				Spec: corev1.PodSpec{
					Hostname:  "job-launcher",
					Subdomain: "job",
					Containers: []corev1.Container{{
						Name:    "launcher",
						Image:   "mpi:launcher",
						Command: []string{"mpirun", "python", "train.py"},
						Env:     testOpenMPIEnv(),
						VolumeMounts: []corev1.VolumeMount{
							{Name: "ssh-auth", MountPath: "/root/.ssh"},
							{Name: "mpi-job-config", MountPath: "/etc/mpi"},
						},
					}},
					Volumes: []corev1.Volume{
						testSSHVolume(ptr[int32](0o600)),
						{
							Name: "mpi-job-config",
							VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
								LocalObjectReference: corev1.LocalObjectReference{Name: "job-config"},
								Items: []corev1.KeyToPath{
									{Key: "hostfile", Path: "hostfile", Mode: ptr[int32](0o444)},
									{Key: "discover_hosts.sh", Path: "discover_hosts.sh", Mode: ptr[int32](0o555)},
								},
							}},
						},
					},
					RestartPolicy: corev1.RestartPolicyOnFailure,
				},
			},
		},
	}
}

func TestNewLauncherJob(t *testing.T) {
	launcherSpec := func(j *v2beta1.MPIJob) *v2beta1.ReplicaSpec {
		return j.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeLauncher]
	}
	env := func(lj *batchv1.Job) *[]corev1.EnvVar { return &lj.Spec.Template.Spec.Containers[0].Env }
	permanentCodes := make([]int32, 127)
	for i := range permanentCodes {
		permanentCodes[i] = int32(i + 1)
	}
	cases := []struct {
		name   string
		gang   gangScheduler
		modify func(*v2beta1.MPIJob)
		// want changes testLauncherJob into the expected Job.
		want func(*batchv1.Job)
	}{
		{name: "OpenMPI"},
		{
			name:   "OpenMPI with slotsPerWorker",
			modify: func(j *v2beta1.MPIJob) { j.Spec.SlotsPerWorker = ptr[int32](8) },
			want:   func(lj *batchv1.Job) { (*env(lj))[4].Value = "8" },
		},
		{
			name: "Intel",
			modify: func(j *v2beta1.MPIJob) {
				j.Spec.MPIImplementation = v2beta1.MPIImplementationIntel
				j.Spec.SlotsPerWorker = ptr[int32](4)
			},
			want: func(lj *batchv1.Job) {
				*env(lj) = []corev1.EnvVar{
					{Name: "K_MPI_JOB_ROLE", Value: "launcher"},
					{Name: "I_MPI_HYDRA_HOST_FILE", Value: "/etc/mpi/hostfile"},
					{Name: "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", Value: "-o ConnectionAttempts=10"},
					{Name: "I_MPI_PERHOST", Value: "4"},
					{Name: "NVIDIA_VISIBLE_DEVICES"},
					{Name: "NVIDIA_DRIVER_CAPABILITIES"},
				}
			},
		},
		{
			name:   "MPICH",
			modify: func(j *v2beta1.MPIJob) { j.Spec.MPIImplementation = v2beta1.MPIImplementationMPICH },
			want: func(lj *batchv1.Job) {
				*env(lj) = []corev1.EnvVar{
					{Name: "K_MPI_JOB_ROLE", Value: "launcher"},
					{Name: "HYDRA_HOST_FILE", Value: "/etc/mpi/hostfile"},
					{Name: "HYDRA_LAUNCH_EXTRA_ARGS", Value: "-o ConnectionAttempts=10"},
					{Name: "NVIDIA_VISIBLE_DEVICES"},
					{Name: "NVIDIA_DRIVER_CAPABILITIES"},
				}
			},
		},
		{
			name:   "the launcher as a worker sees its GPUs and has replica index 0",
			modify: func(j *v2beta1.MPIJob) { j.Spec.RunLauncherAsWorker = ptr(true) },
			want: func(lj *batchv1.Job) {
				*env(lj) = testOpenMPIEnv()[:5]
				lj.Spec.Template.Labels["training.kubeflow.org/replica-index"] = "0"
			},
		},
		{
			name: "MPICH with the launcher as a worker: GPUs, and no search domain on the launcher",
			modify: func(j *v2beta1.MPIJob) {
				j.Spec.MPIImplementation = v2beta1.MPIImplementationMPICH
				j.Spec.RunLauncherAsWorker = ptr(true)
			},
			want: func(lj *batchv1.Job) {
				*env(lj) = []corev1.EnvVar{
					{Name: "K_MPI_JOB_ROLE", Value: "launcher"},
					{Name: "HYDRA_HOST_FILE", Value: "/etc/mpi/hostfile"},
					{Name: "HYDRA_LAUNCH_EXTRA_ARGS", Value: "-o ConnectionAttempts=10"},
				}
				lj.Spec.Template.Labels["training.kubeflow.org/replica-index"] = "0"
			},
		},
		{
			name: "the template's values come first and the operator's follow, winning where both set a name",
			modify: func(j *v2beta1.MPIJob) {
				launcherSpec(j).Template.Spec.Containers[0].Env = []corev1.EnvVar{
					{Name: "NVIDIA_VISIBLE_DEVICES", Value: "all"},
					{Name: "OMPI_MCA_plm_rsh_args", Value: "-o ConnectionAttempts=30 -p 2222"},
				}
			},
			want: func(lj *batchv1.Job) {
				*env(lj) = append([]corev1.EnvVar{
					{Name: "NVIDIA_VISIBLE_DEVICES", Value: "all"},
					{Name: "OMPI_MCA_plm_rsh_args", Value: "-o ConnectionAttempts=30 -p 2222"},
				}, testOpenMPIEnv()...)
			},
		},
		{
			name: "runPolicy bounds the Job",
			modify: func(j *v2beta1.MPIJob) {
				j.Spec.RunPolicy.BackoffLimit = ptr[int32](3)
				j.Spec.RunPolicy.ActiveDeadlineSeconds = ptr[int64](600)
				j.Spec.RunPolicy.TTLSecondsAfterFinished = ptr[int32](60)
			},
			want: func(lj *batchv1.Job) {
				lj.Spec.BackoffLimit = ptr[int32](3)
				lj.Spec.ActiveDeadlineSeconds = ptr[int64](600)
				lj.Spec.TTLSecondsAfterFinished = ptr[int32](60)
			},
		},
		{
			name:   "suspended with the MPIJob",
			modify: func(j *v2beta1.MPIJob) { j.Spec.RunPolicy.Suspend = ptr(true) },
			want:   func(lj *batchv1.Job) { lj.Spec.Suspend = ptr(true) },
		},
		{
			name:   "ExitCode: Never, and the Job fails at once on a permanent exit code",
			modify: func(j *v2beta1.MPIJob) { launcherSpec(j).RestartPolicy = v2beta1.RestartPolicyExitCode },
			want: func(lj *batchv1.Job) {
				lj.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
				lj.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
					{
						Action:          batchv1.PodFailurePolicyActionIgnore,
						OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: "DisruptionTarget", Status: "True"}},
					},
					{
						Action: batchv1.PodFailurePolicyActionFailJob,
						OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
							ContainerName: ptr("launcher"),
							Operator:      batchv1.PodFailurePolicyOnExitCodesOpIn,
							Values:        permanentCodes,
						},
					},
				}}
			},
		},
		{
			name:   "Never",
			modify: func(j *v2beta1.MPIJob) { launcherSpec(j).RestartPolicy = v2beta1.RestartPolicyNever },
			want:   func(lj *batchv1.Job) { lj.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever },
		},
		{
			name:   "Always, which a Job's pod cannot have, is OnFailure",
			modify: func(j *v2beta1.MPIJob) { launcherSpec(j).RestartPolicy = v2beta1.RestartPolicyAlways },
			want:   func(lj *batchv1.Job) { lj.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure },
		},
		{
			name:   "the template's restartPolicy gives way to the replica's",
			modify: func(j *v2beta1.MPIJob) { launcherSpec(j).Template.Spec.RestartPolicy = corev1.RestartPolicyNever },
		},
		{
			name: "volcano",
			gang: gangScheduler{kind: gangVolcano, schedulerName: "volcano"},
			want: func(lj *batchv1.Job) {
				lj.Spec.Template.Annotations["scheduling.k8s.io/group-name"] = "job"
				lj.Spec.Template.Spec.SchedulerName = "volcano"
			},
		},
		{
			name: "scheduler-plugins",
			gang: gangScheduler{kind: gangSchedulerPlugins, schedulerName: "scheduler-plugins-scheduler"},
			want: func(lj *batchv1.Job) {
				lj.Spec.Template.Labels["scheduling.x-k8s.io/pod-group"] = "job"
				lj.Spec.Template.Spec.SchedulerName = "scheduler-plugins-scheduler"
			},
		},
		{
			name: "the template's labels and annotations are carried; the job's labels win",
			modify: func(j *v2beta1.MPIJob) {
				launcherSpec(j).Template.Labels["training.kubeflow.org/job-role"] = "worker"
				launcherSpec(j).Template.Labels["team"] = "ml"
				launcherSpec(j).Template.Annotations["kueue.x-k8s.io/podset"] = "launcher"
			},
			want: func(lj *batchv1.Job) {
				lj.Spec.Template.Labels["team"] = "ml"
				lj.Spec.Template.Annotations["kueue.x-k8s.io/podset"] = "launcher"
			},
		},
		{
			name:   "SSH keys elsewhere than /root/.ssh",
			modify: func(j *v2beta1.MPIJob) { j.Spec.SSHAuthMountPath = "/home/mpiuser/.ssh" },
			want: func(lj *batchv1.Job) {
				spec := &lj.Spec.Template.Spec
				spec.Volumes[0] = testSSHVolume(nil)
				spec.Containers[0].VolumeMounts[0].MountPath = "/home/mpiuser/.ssh"
			},
		},
		{
			name:   "host network",
			modify: func(j *v2beta1.MPIJob) { launcherSpec(j).Template.Spec.HostNetwork = true },
			want: func(lj *batchv1.Job) {
				lj.Spec.Template.Spec.HostNetwork = true
				lj.Spec.Template.Spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := newTestJob(2, tc.modify)
			want := testLauncherJob()
			if tc.want != nil {
				tc.want(want)
			}
			if diff := cmp.Diff(want, newLauncherJob(job, tc.gang)); diff != "" {
				t.Errorf("newLauncherJob (-want +got):\n%s", diff)
			}
		})
	}
}
