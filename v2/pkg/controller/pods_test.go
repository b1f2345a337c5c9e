package controller

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// testSSHVolume is the SSH volume of newTestJob's pods, with the given
// default mode.
func testSSHVolume(mode *int32) corev1.Volume {
	return corev1.Volume{
		Name: "ssh-auth",
		VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  "job-ssh",
			DefaultMode: mode,
			Items: []corev1.KeyToPath{
				{Key: "ssh-privatekey", Path: "id_rsa"},
				{Key: "ssh-publickey", Path: "id_rsa.pub"},
				{Key: "ssh-publickey", Path: "authorized_keys"},
			},
		}},
	}
}

// testWorker is the worker newTestJob yields for index without a gang
// scheduler.
func testWorker(index string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      "job-worker-" + index,
			Namespace: "ns",
			Labels: map[string]string{
				"app.kubernetes.io/name":              "trainer",
				"training.kubeflow.org/operator-name": "mpi-operator",
				"training.kubeflow.org/job-name":      "job",
				"training.kubeflow.org/job-role":      "worker",
				"training.kubeflow.org/replica-index": index,
			},
			Annotations:     map[string]string{"sidecar.istio.io/inject": "false"},
			OwnerReferences: testOwners(),
		},
		Spec: corev1.PodSpec{
			Hostname:  "job-worker-" + index,
			Subdomain: "job",
			Containers: []corev1.Container{{
				Name:         "worker",
				Image:        "mpi:worker",
				Command:      []string{"/usr/sbin/sshd", "-De"},
				Env:          []corev1.EnvVar{{Name: "K_MPI_JOB_ROLE", Value: "worker"}},
				VolumeMounts: []corev1.VolumeMount{{Name: "ssh-auth", MountPath: "/root/.ssh"}},
			}},
			Volumes:       []corev1.Volume{testSSHVolume(ptr[int32](0o600))},
			RestartPolicy: corev1.RestartPolicyNever,
			DNSConfig:     &corev1.PodDNSConfig{Searches: []string{"job.ns.svc.cluster.local"}},
		},
	}
}

func TestNewWorker(t *testing.T) {
	workerSpec := func(j *v2beta1.MPIJob) *v2beta1.ReplicaSpec {
		return j.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeWorker]
	}
	workerPod := func(j *v2beta1.MPIJob) *corev1.PodSpec { return &workerSpec(j).Template.Spec }
	restartCase := func(policy v2beta1.RestartPolicy) func(*v2beta1.MPIJob) {
		return func(j *v2beta1.MPIJob) { workerSpec(j).RestartPolicy = policy }
	}
	cases := []struct {
		name          string
		index         int
		gang          gangScheduler
		clusterDomain string
		modify        func(*v2beta1.MPIJob)
		// want changes testWorker of the index into the expected pod.
		want func(*corev1.Pod)
	}{
		{name: "worker 0", index: 0},
		{name: "worker 12: index in name, hostname and label", index: 12},
		{
			name:   "a command of its own is kept, no sshd",
			index:  1,
			modify: func(j *v2beta1.MPIJob) { workerPod(j).Containers[0].Command = []string{"/start.sh"} },
			want:   func(p *corev1.Pod) { p.Spec.Containers[0].Command = []string{"/start.sh"} },
		},
		{
			name:   "arguments without a command are the image's entrypoint's: no sshd",
			index:  1,
			modify: func(j *v2beta1.MPIJob) { workerPod(j).Containers[0].Args = []string{"--serve"} },
			want: func(p *corev1.Pod) {
				p.Spec.Containers[0].Command = nil
				p.Spec.Containers[0].Args = []string{"--serve"}
			},
		},
		{
			name:  "the job's labels win over the template's; the template's others are kept",
			index: 1,
			modify: func(j *v2beta1.MPIJob) {
				workerSpec(j).Template.Labels["training.kubeflow.org/job-role"] = "launcher"
				workerSpec(j).Template.Labels["training.kubeflow.org/replica-index"] = "7"
				workerSpec(j).Template.Labels["team"] = "ml"
				workerSpec(j).Template.Annotations["prometheus.io/scrape"] = "true"
			},
			want: func(p *corev1.Pod) {
				p.Labels["team"] = "ml"
				p.Annotations["prometheus.io/scrape"] = "true"
			},
		},
		{
			name:  "a template without labels or annotations",
			index: 1,
			modify: func(j *v2beta1.MPIJob) {
				workerSpec(j).Template.Labels = nil
				workerSpec(j).Template.Annotations = nil
			},
			want: func(p *corev1.Pod) {
				delete(p.Labels, "app.kubernetes.io/name")
				p.Annotations = nil
			},
		},
		{name: "restartPolicy Never", index: 1, modify: restartCase(v2beta1.RestartPolicyNever)},
		{
			name: "restartPolicy Always", index: 1, modify: restartCase(v2beta1.RestartPolicyAlways),
			want: func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyAlways },
		},
		{
			name: "restartPolicy OnFailure", index: 1, modify: restartCase(v2beta1.RestartPolicyOnFailure),
			want: func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure },
		},
		{
			name: "restartPolicy ExitCode: the pod never restarts by itself", index: 1,
			modify: restartCase(v2beta1.RestartPolicyExitCode),
		},
		{
			name:   "the template's restartPolicy gives way to the replica's",
			index:  1,
			modify: func(j *v2beta1.MPIJob) { workerPod(j).RestartPolicy = corev1.RestartPolicyAlways },
		},
		{
			name:  "volcano: group annotation and scheduler",
			index: 1,
			gang:  gangScheduler{kind: gangVolcano, schedulerName: "volcano"},
			want: func(p *corev1.Pod) {
				p.Annotations["scheduling.k8s.io/group-name"] = "job"
				p.Spec.SchedulerName = "volcano"
			},
		},
		{
			name:  "scheduler-plugins: pod-group label and scheduler, over the template's scheduler",
			index: 1,
			gang:  gangScheduler{kind: gangSchedulerPlugins, schedulerName: "scheduler-plugins-scheduler"},
			modify: func(j *v2beta1.MPIJob) {
				workerPod(j).SchedulerName = "default-scheduler"
				workerSpec(j).Template.Annotations = nil
			},
			want: func(p *corev1.Pod) {
				p.Labels["scheduling.x-k8s.io/pod-group"] = "job"
				p.Spec.SchedulerName = "scheduler-plugins-scheduler"
				p.Annotations = nil
			},
		},
		{
			name:   "volcano without a scheduler name keeps the template's",
			index:  1,
			gang:   gangScheduler{kind: gangVolcano},
			modify: func(j *v2beta1.MPIJob) { workerPod(j).SchedulerName = "my-volcano" },
			want: func(p *corev1.Pod) {
				p.Annotations["scheduling.k8s.io/group-name"] = "job"
				p.Spec.SchedulerName = "my-volcano"
			},
		},
		{
			name:   "no gang scheduling: the template's scheduler",
			index:  1,
			gang:   gangScheduler{schedulerName: "ignored"},
			modify: func(j *v2beta1.MPIJob) { workerPod(j).SchedulerName = "mine" },
			want:   func(p *corev1.Pod) { p.Spec.SchedulerName = "mine" },
		},
		{
			name:   "SSH keys elsewhere than /root/.ssh keep the volume's default mode",
			index:  1,
			modify: func(j *v2beta1.MPIJob) { j.Spec.SSHAuthMountPath = "/home/mpiuser/.ssh" },
			want: func(p *corev1.Pod) {
				p.Spec.Volumes = []corev1.Volume{testSSHVolume(nil)}
				p.Spec.Containers[0].VolumeMounts[0].MountPath = "/home/mpiuser/.ssh"
			},
		},
		{
			name:   "Intel searches the job's domain as every worker does",
			index:  1,
			modify: func(j *v2beta1.MPIJob) { j.Spec.MPIImplementation = v2beta1.MPIImplementationIntel },
		},
		{
			name:   "MPICH too",
			index:  1,
			modify: func(j *v2beta1.MPIJob) { j.Spec.MPIImplementation = v2beta1.MPIImplementationMPICH },
		},
		{
			name:          "with a cluster domain, after the template's search domains",
			index:         1,
			clusterDomain: "cluster.example",
			modify: func(j *v2beta1.MPIJob) {
				workerPod(j).DNSConfig = &corev1.PodDNSConfig{Searches: []string{"corp.example"}, Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr("2")}}}
			},
			want: func(p *corev1.Pod) {
				p.Spec.DNSConfig = &corev1.PodDNSConfig{
					Searches: []string{"corp.example", "job.ns.svc.cluster.example"},
					Options:  []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr("2")}},
				}
			},
		},
		{
			name:  "a template that already searches the domain lists it once",
			index: 1,
			modify: func(j *v2beta1.MPIJob) {
				workerPod(j).DNSConfig = &corev1.PodDNSConfig{Searches: []string{"job.ns.svc.cluster.local"}}
			},
		},
		{
			name:   "the launcher as a worker has replica index 0: the workers' are their indices plus one",
			index:  1,
			modify: func(j *v2beta1.MPIJob) { j.Spec.RunLauncherAsWorker = ptr(true) },
			want:   func(p *corev1.Pod) { p.Labels["training.kubeflow.org/replica-index"] = "2" },
		},
		{
			name:   "host network: cluster DNS kept",
			index:  1,
			modify: func(j *v2beta1.MPIJob) { workerPod(j).HostNetwork = true },
			want: func(p *corev1.Pod) {
				p.Spec.HostNetwork = true
				p.Spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
			},
		},
		{
			name:  "host network with an explicit DNS policy other than ClusterFirst: kept",
			index: 1,
			modify: func(j *v2beta1.MPIJob) {
				workerPod(j).HostNetwork = true
				workerPod(j).DNSPolicy = corev1.DNSDefault
			},
			want: func(p *corev1.Pod) {
				p.Spec.HostNetwork = true
				p.Spec.DNSPolicy = corev1.DNSDefault
			},
		},
		{
			name:  "the template's env, volumes and mounts come first; the operator's role variable follows",
			index: 1,
			modify: func(j *v2beta1.MPIJob) {
				pod := workerPod(j)
				pod.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "K_MPI_JOB_ROLE", Value: "mine"}}
				pod.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
				pod.Volumes = []corev1.Volume{{Name: "data"}}
			},
			want: func(p *corev1.Pod) {
				p.Spec.Containers[0].Env = []corev1.EnvVar{
					{Name: "A", Value: "1"}, {Name: "K_MPI_JOB_ROLE", Value: "mine"}, {Name: "K_MPI_JOB_ROLE", Value: "worker"},
				}
				p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
					{Name: "data", MountPath: "/data"},
					{Name: "ssh-auth", MountPath: "/root/.ssh"},
				}
				p.Spec.Volumes = []corev1.Volume{{Name: "data"}, testSSHVolume(ptr[int32](0o600))}
			},
		},
		{
			name:  "only the first container runs sshd and gets the keys",
			index: 1,
			modify: func(j *v2beta1.MPIJob) {
				pod := workerPod(j)
				pod.Containers = append(pod.Containers, corev1.Container{Name: "sidecar", Image: "proxy"})
			},
			want: func(p *corev1.Pod) {
				p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "sidecar", Image: "proxy"})
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := newTestJob(2, tc.modify)
			want := testWorker(strconv.Itoa(tc.index))
			if tc.want != nil {
				tc.want(want)
			}
			if diff := cmp.Diff(want, newWorker(job, tc.index, tc.gang, tc.clusterDomain)); diff != "" {
				t.Errorf("newWorker (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBuildersLeaveTheJobAlone builds every child of a job that sets every
// optional field, changes the children, and checks that the job is as it
// was: children share no memory with the job, and the next sync builds
// from the same job.
func TestBuildersLeaveTheJobAlone(t *testing.T) {
	job := newTestJob(2, func(j *v2beta1.MPIJob) {
		j.Spec.MPIImplementation = v2beta1.MPIImplementationIntel
		j.Spec.RunPolicy = v2beta1.RunPolicy{
			BackoffLimit:            ptr[int32](2),
			ActiveDeadlineSeconds:   ptr[int64](60),
			TTLSecondsAfterFinished: ptr[int32](30),
			SchedulingPolicy: &v2beta1.SchedulingPolicy{
				MinResources:           &corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
				ScheduleTimeoutSeconds: ptr[int32](10),
			},
		}
		for _, spec := range j.Spec.MPIReplicaSpecs {
			spec.Template.Spec.DNSConfig = &corev1.PodDNSConfig{Searches: []string{"corp.example"}}
			spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}}
		}
	})
	before := job.DeepCopy()
	gang := gangScheduler{kind: gangVolcano, schedulerName: "volcano"}

	worker := newWorker(job, 0, gang, "")
	worker.Labels["x"] = "y"
	worker.Annotations["x"] = "y"
	worker.Spec.DNSConfig.Searches[0] = "changed"
	worker.Spec.Containers[0].Env[0].Value = "changed"
	worker.Spec.Containers[0].Command[0] = "changed"

	launcher := newLauncherJob(job, gang)
	launcher.Spec.Template.Labels["x"] = "y"
	launcher.Spec.Template.Spec.Containers[0].Env[0].Value = "changed"
	*launcher.Spec.BackoffLimit = 9
	*launcher.Spec.ActiveDeadlineSeconds = 9
	*launcher.Spec.TTLSecondsAfterFinished = 9

	volcano := newVolcanoPodGroup(job)
	(*volcano.Spec.MinResources)[corev1.ResourceCPU] = resource.MustParse("9")
	plugins := newSchedulerPluginsPodGroup(job)
	plugins.Spec.MinResources[corev1.ResourceCPU] = resource.MustParse("9")
	*plugins.Spec.ScheduleTimeoutSeconds = 9

	newService(job).Spec.Selector["x"] = "y"
	newConfigMap(job, []string{"job-worker-0"}, nil, nil, "", nil).Data["x"] = "y"

	if diff := cmp.Diff(before, job); diff != "" {
		t.Errorf("the job changed (-before +after):\n%s", diff)
	}
}
