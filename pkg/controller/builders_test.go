package controller

import (
	"os/exec"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
)

// newTestJobForBuilders returns a defaulted job "ns/job" with a launcher
// that runs mpirun and workers without a command. TypeMeta is left empty on
// purpose: objects from a lister have none, and the builders must not need
// it.
func newTestJobForBuilders(workers int32) *kubeflow.MPIJob {
	job := &kubeflow.MPIJob{
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns", UID: types.UID("job-uid")},
		Spec: kubeflow.MPIJobSpec{
			MPIReplicaSpecs: map[common.ReplicaType]*common.ReplicaSpec{
				kubeflow.MPIReplicaTypeLauncher: {
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": "trainer"}},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{
							Name:    "launcher",
							Image:   "mpi:launcher",
							Command: []string{"mpirun", "python", "train.py"},
						}}},
					},
				},
				kubeflow.MPIReplicaTypeWorker: {
					Replicas: ptr(workers),
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": "trainer"}},
						Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "worker", Image: "mpi:worker"}}},
					},
				},
			},
		},
	}
	kubeflow.SetDefaults_MPIJob(job)
	return job
}

// builderTestOwners is the ownerReference every child of newTestJobForBuilders
// must carry, written out rather than derived from the code under test.
func builderTestOwners() []metav1.OwnerReference {
	return []metav1.OwnerReference{{
		APIVersion:         "kubeflow.org/v1",
		Kind:               "MPIJob",
		Name:               "job",
		UID:                types.UID("job-uid"),
		Controller:         ptr(true),
		BlockOwnerDeletion: ptr(true),
	}}
}

func builderTestGPULimit(job *kubeflow.MPIJob, name corev1.ResourceName) {
	c := &job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher].Template.Spec.Containers[0]
	c.Resources.Limits = corev1.ResourceList{name: resource.MustParse("1")}
}

const (
	builderTestKubexec        = "#!/bin/sh\nPOD_NAME=$1\nshift\n/opt/kube/kubectl exec ${POD_NAME} -- /bin/sh -c \"$*\"\n"
	builderTestWorkerSelector = "group-name=kubeflow.org,mpi-job-name=job,mpi-job-role=worker"
)

func TestNewConfigMap(t *testing.T) {
	cases := []struct {
		name   string
		modify func(*kubeflow.MPIJob)
		hosts  elastic.Hosts
		// the files; kubexec.sh is builderTestKubexec unless given
		hostfile, discover, kubexec string
	}{
		{
			name:     "two workers, one running",
			hosts:    elastic.Hosts{Desired: []string{"job-worker-0", "job-worker-1"}, Running: []string{"job-worker-0"}},
			hostfile: "job-worker-0 slots=1\njob-worker-1 slots=1\n",
			discover: "#!/bin/sh\necho job-worker-0:1\n",
		},
		{
			name: "slotsPerWorker and mainContainer",
			modify: func(j *kubeflow.MPIJob) {
				j.Spec.SlotsPerWorker = ptr[int32](4)
				j.Spec.MainContainer = "trainer"
			},
			hosts:    elastic.Hosts{Desired: []string{"job-worker-0", "job-worker-1"}, Running: []string{"job-worker-0", "job-worker-1"}},
			hostfile: "job-worker-0 slots=4\njob-worker-1 slots=4\n",
			discover: "#!/bin/sh\necho job-worker-0:4\necho job-worker-1:4\n",
			kubexec:  "#!/bin/sh\nPOD_NAME=$1\nshift\n/opt/kube/kubectl exec ${POD_NAME} --container trainer -- /bin/sh -c \"$*\"\n",
		},
		{
			name: "GPU launcher (nvidia.com/gpu limit) is listed first in both files",
			modify: func(j *kubeflow.MPIJob) {
				builderTestGPULimit(j, "nvidia.com/gpu")
				j.Spec.SlotsPerWorker = ptr[int32](2)
			},
			hosts:    elastic.Hosts{Desired: []string{"job-worker-0", "job-worker-1"}, Running: []string{"job-worker-1"}},
			hostfile: "job-launcher slots=2\njob-worker-0 slots=2\njob-worker-1 slots=2\n",
			discover: "#!/bin/sh\necho job-launcher:2\necho job-worker-1:2\n",
		},
		{
			name:     "GPU launcher with another vendor's gpu resource and no workers",
			modify:   func(j *kubeflow.MPIJob) { builderTestGPULimit(j, "amd.com/gpu") },
			hostfile: "job-launcher slots=1\n",
			discover: "#!/bin/sh\necho job-launcher:1\n",
		},
		{
			name: "a GPU request without a limit does not make a GPU launcher",
			modify: func(j *kubeflow.MPIJob) {
				c := &j.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher].Template.Spec.Containers[0]
				c.Resources.Requests = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
			},
			hosts:    elastic.Hosts{Desired: []string{"job-worker-0"}},
			hostfile: "job-worker-0 slots=1\n",
			discover: "#!/bin/sh\n",
		},
		{
			name: "GPU limit on a second launcher container counts",
			modify: func(j *kubeflow.MPIJob) {
				spec := &j.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher].Template.Spec
				spec.Containers = append(spec.Containers, corev1.Container{
					Name: "helper", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
				})
			},
			hosts:    elastic.Hosts{Desired: []string{"job-worker-0"}, Running: []string{"job-worker-0"}},
			hostfile: "job-launcher slots=1\njob-worker-0 slots=1\n",
			discover: "#!/bin/sh\necho job-launcher:1\necho job-worker-0:1\n",
		},
		{
			name:     "job without a launcher spec is not a GPU launcher",
			modify:   func(j *kubeflow.MPIJob) { delete(j.Spec.MPIReplicaSpecs, kubeflow.MPIReplicaTypeLauncher) },
			hosts:    elastic.Hosts{Desired: []string{"job-worker-0"}, Running: []string{"job-worker-0"}},
			hostfile: "job-worker-0 slots=1\n",
			discover: "#!/bin/sh\necho job-worker-0:1\n",
		},
		{
			name:     "no workers at all: empty hostfile, discovery script lists nothing",
			discover: "#!/bin/sh\n",
		},
		{
			name:     "order of the given lists is kept (the caller sorts numerically)",
			hosts:    elastic.Hosts{Desired: []string{"job-worker-2", "job-worker-10"}, Running: []string{"job-worker-2", "job-worker-10"}},
			hostfile: "job-worker-2 slots=1\njob-worker-10 slots=1\n",
			discover: "#!/bin/sh\necho job-worker-2:1\necho job-worker-10:1\n",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := newTestJobForBuilders(2)
			if tc.modify != nil {
				tc.modify(job)
			}
			want := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{
					Name:            "job-config",
					Namespace:       "ns",
					Labels:          map[string]string{"app": "job"},
					OwnerReferences: builderTestOwners(),
				},
				Data: map[string]string{"hostfile": tc.hostfile, "kubexec.sh": tc.kubexec, "discover_hosts.sh": tc.discover},
			}
			if tc.kubexec == "" {
				want.Data["kubexec.sh"] = builderTestKubexec
			}
			if diff := cmp.Diff(want, newConfigMap(job, tc.hosts, elastic.State{})); diff != "" {
				t.Errorf("newConfigMap (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDiscoverHostsScriptRuns runs the generated script through /bin/sh, as
// Horovod does, and checks its host:slots output.
func TestDiscoverHostsScriptRuns(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	job := newTestJobForBuilders(3)
	job.Spec.SlotsPerWorker = ptr[int32](2)
	cm := newConfigMap(job, elastic.Hosts{Running: []string{"job-worker-0", "job-worker-2"}}, elastic.State{})
	out, err := exec.Command(sh, "-c", cm.Data[discoverHostsKey]).Output()
	if err != nil {
		t.Fatalf("running discover_hosts.sh: %v", err)
	}
	if diff := cmp.Diff("job-worker-0:2\njob-worker-2:2\n", string(out)); diff != "" {
		t.Errorf("discover_hosts.sh output (-want +got):\n%s", diff)
	}
	empty := newConfigMap(job, elastic.Hosts{}, elastic.State{})
	out, err = exec.Command(sh, "-c", empty.Data[discoverHostsKey]).Output()
	if err != nil || len(out) != 0 {
		t.Errorf("empty discover_hosts.sh: output %q, err %v; want no output and success", out, err)
	}
}

func TestNewLauncherServiceAccount(t *testing.T) {
	want := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
		Name:            "job-launcher",
		Namespace:       "ns",
		Labels:          map[string]string{"app": "job"},
		OwnerReferences: builderTestOwners(),
	}}
	if diff := cmp.Diff(want, newLauncherServiceAccount(newTestJobForBuilders(2))); diff != "" {
		t.Errorf("newLauncherServiceAccount (-want +got):\n%s", diff)
	}
}

func TestNewLauncherRole(t *testing.T) {
	readPods := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}
	cases := []struct {
		name      string
		workers   []string
		wantRules []rbacv1.PolicyRule
	}{
		{
			name:    "two workers: read pods, exec into exactly those",
			workers: []string{"job-worker-0", "job-worker-1"},
			wantRules: []rbacv1.PolicyRule{readPods, {
				APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"create"},
				ResourceNames: []string{"job-worker-0", "job-worker-1"},
			}},
		},
		{
			name:      "nil workers: no exec rule at all",
			workers:   nil,
			wantRules: []rbacv1.PolicyRule{readPods},
		},
		{
			name:      "empty worker list: no exec rule (an empty resourceNames would allow every pod)",
			workers:   []string{},
			wantRules: []rbacv1.PolicyRule{readPods},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := &rbacv1.Role{
				ObjectMeta: metav1.ObjectMeta{Name: "job-launcher", Namespace: "ns", OwnerReferences: builderTestOwners()},
				Rules:      tc.wantRules,
			}
			got := newLauncherRole(newTestJobForBuilders(2), tc.workers)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("newLauncherRole (-want +got):\n%s", diff)
			}
			for _, r := range got.Rules {
				for _, res := range r.Resources {
					if res == "pods/exec" && len(r.ResourceNames) == 0 {
						t.Errorf("rule %+v grants exec on every pod of the namespace", r)
					}
				}
			}
		})
	}
}

func TestNewLauncherRoleBinding(t *testing.T) {
	want := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "job-launcher", Namespace: "ns", OwnerReferences: builderTestOwners()},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "job-launcher", Namespace: "ns"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "job-launcher"},
	}
	if diff := cmp.Diff(want, newLauncherRoleBinding(newTestJobForBuilders(2))); diff != "" {
		t.Errorf("newLauncherRoleBinding (-want +got):\n%s", diff)
	}
}

func TestNewPodGroup(t *testing.T) {
	cases := []struct {
		name      string
		runPolicy *common.RunPolicy
		// queueAnnotation and the priority classes are where the upstream
		// operator read the queue and priority from.
		queueAnnotation          string
		launcherPrio, workerPrio string
		minMember                int32
		wantSpec                 volcanov1beta1.PodGroupSpec
	}{
		{
			name:            "upstream's places: queue annotation, launcher's priority class",
			queueAnnotation: "team-a", launcherPrio: "high", workerPrio: "low",
			minMember: 3,
			wantSpec:  volcanov1beta1.PodGroupSpec{MinMember: 3, Queue: "team-a", PriorityClassName: "high"},
		},
		{
			name:       "the workers' priority class when the launcher has none",
			workerPrio: "low",
			minMember:  3,
			wantSpec:   volcanov1beta1.PodGroupSpec{MinMember: 3, PriorityClassName: "low"},
		},
		{
			name:            "the scheduling policy wins over upstream's places",
			runPolicy:       &common.RunPolicy{SchedulingPolicy: &common.SchedulingPolicy{Queue: "research", PriorityClass: "urgent"}},
			queueAnnotation: "team-a", launcherPrio: "high",
			minMember: 3,
			wantSpec:  volcanov1beta1.PodGroupSpec{MinMember: 3, Queue: "research", PriorityClassName: "urgent"},
		},
		{
			name:      "no run policy: minMember as given",
			minMember: 3,
			wantSpec:  volcanov1beta1.PodGroupSpec{MinMember: 3},
		},
		{
			name:      "run policy without scheduling policy",
			runPolicy: &common.RunPolicy{BackoffLimit: ptr[int32](3)},
			minMember: 5,
			wantSpec:  volcanov1beta1.PodGroupSpec{MinMember: 5},
		},
		{
			name: "scheduling policy feeds every field; minAvailable wins over minMember",
			runPolicy: &common.RunPolicy{SchedulingPolicy: &common.SchedulingPolicy{
				MinAvailable:  ptr[int32](2),
				Queue:         "research",
				PriorityClass: "high",
				MinResources:  &corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), "nvidia.com/gpu": resource.MustParse("2")},
			}},
			minMember: 5,
			wantSpec: volcanov1beta1.PodGroupSpec{
				MinMember:         2,
				Queue:             "research",
				PriorityClassName: "high",
				MinResources:      &corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), "nvidia.com/gpu": resource.MustParse("2")},
			},
		},
		{
			name:      "scheduling policy with only a queue keeps minMember",
			runPolicy: &common.RunPolicy{SchedulingPolicy: &common.SchedulingPolicy{Queue: "q"}},
			minMember: 4,
			wantSpec:  volcanov1beta1.PodGroupSpec{MinMember: 4, Queue: "q"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := newTestJobForBuilders(2)
			job.Spec.RunPolicy = tc.runPolicy
			if tc.queueAnnotation != "" {
				job.Annotations = map[string]string{"scheduling.volcano.sh/queue-name": tc.queueAnnotation}
			}
			job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher].Template.Spec.PriorityClassName = tc.launcherPrio
			job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker].Template.Spec.PriorityClassName = tc.workerPrio
			want := &volcanov1beta1.PodGroup{
				ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns", OwnerReferences: builderTestOwners()},
				Spec:       tc.wantSpec,
			}
			if diff := cmp.Diff(want, newPodGroup(job, tc.minMember)); diff != "" {
				t.Errorf("newPodGroup (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGangMinimums: the PodGroup's minMember is the launcher plus every
// worker, or plus an elastic job's minimum; the launcher waits for as many
// ready workers.
func TestGangMinimums(t *testing.T) {
	cases := []struct {
		name                        string
		workers                     int32
		minReplicas                 *int32
		wantMinMember, wantMinReady int32
	}{
		{name: "fixed job with 4 workers", workers: 4, wantMinMember: 5, wantMinReady: 4},
		{name: "job with 0 workers", workers: 0, wantMinMember: 1, wantMinReady: 0},
		{name: "elastic job with minReplicas 2", workers: 4, minReplicas: ptr[int32](2), wantMinMember: 3, wantMinReady: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := newTestJobForBuilders(tc.workers)
			if tc.minReplicas != nil {
				job.Spec.ElasticPolicy = &kubeflow.ElasticPolicy{MinReplicas: tc.minReplicas}
				kubeflow.SetDefaults_MPIJob(job)
			}
			if got := podGroupMinMember(job); got != tc.wantMinMember {
				t.Errorf("podGroupMinMember = %d, want %d", got, tc.wantMinMember)
			}
			if got := minReadyWorkers(job); got != tc.wantMinReady {
				t.Errorf("minReadyWorkers = %d, want %d", got, tc.wantMinReady)
			}
		})
	}
}

// builderTestWantWorker is the worker that newTestJobForBuilders yields for
// index without a gang scheduler.
func builderTestWantWorker(index string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      "job-worker-" + index,
			Namespace: "ns",
			Labels: map[string]string{
				"app.kubernetes.io/name":              "trainer",
				"group-name":                          "kubeflow.org",
				"mpi-job-name":                        "job",
				"mpi-job-role":                        "worker",
				"replica-index":                       index,
				"training.kubeflow.org/replica-index": index,
			},
			OwnerReferences: builderTestOwners(),
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:         "worker",
				Image:        "mpi:worker",
				Command:      []string{"sleep"},
				Args:         []string{"365d"},
				VolumeMounts: []corev1.VolumeMount{{Name: "mpi-job-config", MountPath: "/etc/mpi"}},
			}},
			Volumes: []corev1.Volume{{
				Name: "mpi-job-config",
				VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "job-config"},
					Items:                []corev1.KeyToPath{{Key: "kubexec.sh", Path: "kubexec.sh", Mode: ptr[int32](0555)}},
				}},
			}},
			RestartPolicy: corev1.RestartPolicyNever,
		},
	}
}

func TestNewWorker(t *testing.T) {
	workerSpec := func(j *kubeflow.MPIJob) *common.ReplicaSpec {
		return j.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker]
	}
	cases := []struct {
		name   string
		index  int
		gang   string
		modify func(*kubeflow.MPIJob)
		want   func(*corev1.Pod)
	}{
		{name: "plain worker 0", index: 0},
		{name: "index 10 in both labels", index: 10},
		{
			name:  "a command of its own is kept, no sleep",
			index: 1,
			modify: func(j *kubeflow.MPIJob) {
				workerSpec(j).Template.Spec.Containers[0].Command = []string{"/usr/sbin/sshd", "-D"}
			},
			want: func(p *corev1.Pod) {
				p.Spec.Containers[0].Command = []string{"/usr/sbin/sshd", "-D"}
				p.Spec.Containers[0].Args = nil
			},
		},
		{
			name:  "args without a command are replaced by the sleep",
			index: 1,
			modify: func(j *kubeflow.MPIJob) {
				workerSpec(j).Template.Spec.Containers[0].Args = []string{"--flag"}
			},
		},
		{
			name:  "mainContainer picks the container that sleeps and mounts kubexec.sh",
			index: 1,
			modify: func(j *kubeflow.MPIJob) {
				j.Spec.MainContainer = "worker"
				spec := &workerSpec(j).Template.Spec
				spec.Containers = append([]corev1.Container{{Name: "sidecar", Image: "proxy"}}, spec.Containers...)
			},
			want: func(p *corev1.Pod) {
				p.Spec.Containers = append([]corev1.Container{{Name: "sidecar", Image: "proxy"}}, p.Spec.Containers...)
			},
		},
		{
			name:  "unknown mainContainer falls back to the first container",
			index: 1,
			modify: func(j *kubeflow.MPIJob) {
				j.Spec.MainContainer = "missing"
			},
		},
		{
			name:  "template volumes, mounts, labels and annotations are kept; ours win on conflict",
			index: 2,
			modify: func(j *kubeflow.MPIJob) {
				tmpl := &workerSpec(j).Template
				tmpl.Labels["mpi-job-role"] = "bogus"
				tmpl.Labels["replica-index"] = "99"
				tmpl.Annotations = map[string]string{"note": "kept"}
				tmpl.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
				tmpl.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
			},
			want: func(p *corev1.Pod) {
				p.Annotations = map[string]string{"note": "kept"}
				p.Spec.Volumes = append([]corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}, p.Spec.Volumes...)
				p.Spec.Containers[0].VolumeMounts = append([]corev1.VolumeMount{{Name: "data", MountPath: "/data"}}, p.Spec.Containers[0].VolumeMounts...)
			},
		},
		{
			name:   "restartPolicy Always",
			index:  0,
			modify: func(j *kubeflow.MPIJob) { workerSpec(j).RestartPolicy = common.RestartPolicyAlways },
			want:   func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyAlways },
		},
		{
			name:   "restartPolicy OnFailure",
			index:  0,
			modify: func(j *kubeflow.MPIJob) { workerSpec(j).RestartPolicy = common.RestartPolicyOnFailure },
			want:   func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure },
		},
		{
			name:   "restartPolicy ExitCode becomes Never",
			index:  0,
			modify: func(j *kubeflow.MPIJob) { workerSpec(j).RestartPolicy = common.RestartPolicyExitCode },
		},
		{
			name:  "gang scheduling sets the scheduler and the PodGroup annotation",
			index: 3,
			gang:  "volcano",
			want: func(p *corev1.Pod) {
				p.Spec.SchedulerName = "volcano"
				p.Annotations = map[string]string{"scheduling.k8s.io/group-name": "job"}
			},
		},
		{
			name:  "template without labels still gets ours",
			index: 0,
			modify: func(j *kubeflow.MPIJob) {
				workerSpec(j).Template.Labels = nil
			},
			want: func(p *corev1.Pod) { delete(p.Labels, "app.kubernetes.io/name") },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := newTestJobForBuilders(4)
			if tc.modify != nil {
				tc.modify(job)
			}
			want := builderTestWantWorker(strconv.Itoa(tc.index))
			if tc.want != nil {
				tc.want(want)
			}
			if diff := cmp.Diff(want, newWorker(job, tc.index, tc.gang)); diff != "" {
				t.Errorf("newWorker (-want +got):\n%s", diff)
			}
		})
	}
}

func builderTestDelivery(minReady string) corev1.Container {
	res := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("100m"),
		corev1.ResourceMemory:           resource.MustParse("128Mi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("256Mi"),
	}
	return corev1.Container{
		Name:            "kubectl-delivery",
		Image:           "example.com/delivery:1",
		ImagePullPolicy: corev1.PullIfNotPresent,
		Env: []corev1.EnvVar{
			{Name: "TARGET_DIR", Value: "/opt/kube"},
			{Name: "NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "WORKER_SELECTOR", Value: builderTestWorkerSelector},
			{Name: "MIN_READY_WORKERS", Value: minReady},
		},
		Resources: corev1.ResourceRequirements{Limits: res, Requests: res},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "mpi-job-kubectl", MountPath: "/opt/kube"},
			{Name: "mpi-job-config", MountPath: "/etc/mpi"},
		},
	}
}

var builderTestMPIEnv = []corev1.EnvVar{
	{Name: "OMPI_MCA_plm_rsh_agent", Value: "/etc/mpi/kubexec.sh"},
	{Name: "OMPI_MCA_orte_default_hostfile", Value: "/etc/mpi/hostfile"},
}

var builderTestNoGPUEnv = []corev1.EnvVar{
	{Name: "NVIDIA_VISIBLE_DEVICES", Value: ""},
	{Name: "NVIDIA_DRIVER_CAPABILITIES", Value: ""},
}

func builderTestConcat[T any](parts ...[]T) []T {
	var out []T
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

var builderTestLauncherOpts = launcherOptions{deliveryImage: "example.com/delivery:1", minReadyWorkers: 2, hostsHash: "0123abcd"}

// builderTestWantLauncher is the launcher of newTestJobForBuilders for
// builderTestLauncherOpts.
func builderTestWantLauncher() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      "job-launcher",
			Namespace: "ns",
			Labels: map[string]string{
				"app.kubernetes.io/name": "trainer",
				"group-name":             "kubeflow.org",
				"mpi-job-name":           "job",
				"mpi-job-role":           "launcher",
			},
			Annotations:     map[string]string{"mpi-operator.kubeflow.org/hosts-hash": "0123abcd"},
			OwnerReferences: builderTestOwners(),
		},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{builderTestDelivery("2")},
			Containers: []corev1.Container{{
				Name:    "launcher",
				Image:   "mpi:launcher",
				Command: []string{"mpirun", "python", "train.py"},
				Env:     builderTestConcat(builderTestMPIEnv, builderTestNoGPUEnv),
				VolumeMounts: []corev1.VolumeMount{
					{Name: "mpi-job-kubectl", MountPath: "/opt/kube"},
					{Name: "mpi-job-config", MountPath: "/etc/mpi"},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "mpi-job-kubectl", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "mpi-job-config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "job-config"},
					Items: []corev1.KeyToPath{
						{Key: "hostfile", Path: "hostfile", Mode: ptr[int32](0444)},
						{Key: "kubexec.sh", Path: "kubexec.sh", Mode: ptr[int32](0555)},
						{Key: "discover_hosts.sh", Path: "discover_hosts.sh", Mode: ptr[int32](0555)},
					},
				}}},
			},
			RestartPolicy:      corev1.RestartPolicyNever,
			ServiceAccountName: "job-launcher",
		},
	}
}

func TestNewLauncher(t *testing.T) {
	launcherSpec := func(j *kubeflow.MPIJob) *common.ReplicaSpec {
		return j.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher]
	}
	gpu := corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}
	cases := []struct {
		name   string
		opts   func(*launcherOptions)
		modify func(*kubeflow.MPIJob)
		want   func(*corev1.Pod)
	}{
		{name: "non-GPU launcher with hosts hash"},
		{
			name: "no hosts hash: no annotation",
			opts: func(o *launcherOptions) { o.hostsHash = "" },
			want: func(p *corev1.Pod) { p.Annotations = nil },
		},
		{
			name:   "GPU launcher gets no NVIDIA_* overrides",
			modify: func(j *kubeflow.MPIJob) { launcherSpec(j).Template.Spec.Containers[0].Resources = gpu },
			want: func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources = gpu
				p.Spec.Containers[0].Env = builderTestMPIEnv
			},
		},
		{
			name: "gang scheduling",
			opts: func(o *launcherOptions) { o.gangScheduler = "volcano" },
			want: func(p *corev1.Pod) {
				p.Spec.SchedulerName = "volcano"
				p.Annotations["scheduling.k8s.io/group-name"] = "job"
			},
		},
		{
			name: "elastic minimum of ready workers",
			opts: func(o *launcherOptions) { o.minReadyWorkers = 1 },
			want: func(p *corev1.Pod) { p.Spec.InitContainers[0] = builderTestDelivery("1") },
		},
		{
			name: "mainContainer selects the launcher container that gets env and mounts",
			modify: func(j *kubeflow.MPIJob) {
				j.Spec.MainContainer = "launcher"
				spec := &launcherSpec(j).Template.Spec
				spec.Containers = append([]corev1.Container{{Name: "sidecar", Image: "proxy"}}, spec.Containers...)
			},
			want: func(p *corev1.Pod) {
				p.Spec.Containers = append([]corev1.Container{{Name: "sidecar", Image: "proxy"}}, p.Spec.Containers...)
			},
		},
		{
			name: "template init containers, env, volumes and annotations are kept after ours",
			modify: func(j *kubeflow.MPIJob) {
				tmpl := &launcherSpec(j).Template
				tmpl.Annotations = map[string]string{"note": "kept"}
				tmpl.Spec.InitContainers = []corev1.Container{{Name: "prepare", Image: "busybox"}}
				tmpl.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
				tmpl.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "USER_VAR", Value: "1"}}
				tmpl.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
			},
			want: func(p *corev1.Pod) {
				p.Annotations["note"] = "kept"
				p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "prepare", Image: "busybox"})
				p.Spec.Volumes = append([]corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}, p.Spec.Volumes...)
				c := &p.Spec.Containers[0]
				c.Env = builderTestConcat([]corev1.EnvVar{{Name: "USER_VAR", Value: "1"}}, c.Env)
				c.VolumeMounts = append([]corev1.VolumeMount{{Name: "data", MountPath: "/data"}}, c.VolumeMounts...)
			},
		},
		{
			name:   "restartPolicy OnFailure",
			modify: func(j *kubeflow.MPIJob) { launcherSpec(j).RestartPolicy = common.RestartPolicyOnFailure },
			want:   func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure },
		},
		{
			name:   "restartPolicy ExitCode becomes Never",
			modify: func(j *kubeflow.MPIJob) { launcherSpec(j).RestartPolicy = common.RestartPolicyExitCode },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := newTestJobForBuilders(2)
			if tc.modify != nil {
				tc.modify(job)
			}
			opts := builderTestLauncherOpts
			if tc.opts != nil {
				tc.opts(&opts)
			}
			want := builderTestWantLauncher()
			if tc.want != nil {
				tc.want(want)
			}
			if diff := cmp.Diff(want, newLauncher(job, opts)); diff != "" {
				t.Errorf("newLauncher (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBuildersDoNotMutateJob calls every builder on a rich job, then scribbles
// over everything the builders returned: neither step may change the job, so
// the builders copy rather than share the job's maps and slices.
func TestBuildersDoNotMutateJob(t *testing.T) {
	job := newTestJobForBuilders(3)
	job.Spec.MainContainer = "launcher"
	for _, rt := range []common.ReplicaType{kubeflow.MPIReplicaTypeLauncher, kubeflow.MPIReplicaTypeWorker} {
		tmpl := &job.Spec.MPIReplicaSpecs[rt].Template
		tmpl.Annotations = map[string]string{"note": "x"}
		tmpl.Spec.InitContainers = []corev1.Container{{Name: "prepare", Image: "busybox", Env: []corev1.EnvVar{{Name: "A", Value: "1"}}}}
		tmpl.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		c := &tmpl.Spec.Containers[0]
		c.Env = make([]corev1.EnvVar, 1, 10) // spare capacity exposes append aliasing
		c.Env[0] = corev1.EnvVar{Name: "USER", Value: "1"}
		c.VolumeMounts = make([]corev1.VolumeMount, 1, 10)
		c.VolumeMounts[0] = corev1.VolumeMount{Name: "data", MountPath: "/data"}
		c.Args = []string{"a"}
	}
	job.Spec.RunPolicy = &common.RunPolicy{SchedulingPolicy: &common.SchedulingPolicy{
		Queue:        "q",
		MinResources: &corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
	}}
	before := job.DeepCopy()

	hosts := elastic.Hosts{Desired: []string{"job-worker-0"}, Running: []string{"job-worker-0"}}
	cm := newConfigMap(job, hosts, elastic.State{})
	sa := newLauncherServiceAccount(job)
	role := newLauncherRole(job, []string{"job-worker-0"})
	rb := newLauncherRoleBinding(job)
	pg := newPodGroup(job, 4)
	worker := newWorker(job, 0, "volcano")
	launcher := newLauncher(job, launcherOptions{deliveryImage: "img", gangScheduler: "volcano", hostsHash: "h", minReadyWorkers: 3})
	if diff := cmp.Diff(before, job); diff != "" {
		t.Fatalf("building changed the job (-before +after):\n%s", diff)
	}

	cm.Labels["app"] = "scribbled"
	sa.Labels["app"] = "scribbled"
	role.OwnerReferences[0].Name = "scribbled"
	rb.OwnerReferences[0].Name = "scribbled"
	(*pg.Spec.MinResources)[corev1.ResourceCPU] = resource.MustParse("99")
	for _, p := range []*corev1.Pod{worker, launcher} {
		p.Labels["app.kubernetes.io/name"] = "scribbled"
		p.Annotations["note"] = "scribbled"
		for i := range p.Spec.InitContainers {
			p.Spec.InitContainers[i].Image = "scribbled"
			for j := range p.Spec.InitContainers[i].Env {
				p.Spec.InitContainers[i].Env[j].Value = "scribbled"
			}
		}
		for i := range p.Spec.Containers {
			c := &p.Spec.Containers[i]
			c.Image = "scribbled"
			for j := range c.Env {
				c.Env[j].Value = "scribbled"
			}
			for j := range c.VolumeMounts {
				c.VolumeMounts[j].MountPath = "/scribbled"
			}
			for j := range c.Args {
				c.Args[j] = "scribbled"
			}
			c.Env = append(c.Env, corev1.EnvVar{Name: "EXTRA"})
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "extra"})
		}
		for i := range p.Spec.Volumes {
			p.Spec.Volumes[i].Name = "scribbled"
		}
	}
	if diff := cmp.Diff(before, job); diff != "" {
		t.Errorf("changing the built objects changed the job (-before +after):\n%s", diff)
	}
}

// TestBuildersWithoutContainers: an invalid template without containers (the
// job fails validation) must not make the pod builders panic.
func TestBuildersWithoutContainers(t *testing.T) {
	job := newTestJobForBuilders(1)
	for _, rt := range []common.ReplicaType{kubeflow.MPIReplicaTypeLauncher, kubeflow.MPIReplicaTypeWorker} {
		job.Spec.MPIReplicaSpecs[rt].Template.Spec.Containers = nil
	}
	wantWorker := builderTestWantWorker("0")
	wantWorker.Spec.Containers = nil
	wantWorker.Spec.Volumes = nil
	if diff := cmp.Diff(wantWorker, newWorker(job, 0, "")); diff != "" {
		t.Errorf("newWorker (-want +got):\n%s", diff)
	}
	wantLauncher := builderTestWantLauncher()
	wantLauncher.Spec.Containers = nil
	if diff := cmp.Diff(wantLauncher, newLauncher(job, builderTestLauncherOpts)); diff != "" {
		t.Errorf("newLauncher (-want +got):\n%s", diff)
	}
}
