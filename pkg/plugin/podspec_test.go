package plugin

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	common "github.com/kubeflow/common/pkg/apis/common/v1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
)

// TestBuildJobPodOptions checks each of submit's pod options against the
// whole job: BuildJob's defaults, with the option in both pod templates
// (and, for labels and annotations, on the job).
func TestBuildJobPodOptions(t *testing.T) {
	base := JobRequest{Name: "mnist", Namespace: "ml", Image: "horovod:1", Workers: 2, Command: []string{"python", "train.py"}}
	both := func(f func(*corev1.PodTemplateSpec)) func(*kubeflow.MPIJob) {
		return func(j *kubeflow.MPIJob) {
			for _, spec := range j.Spec.MPIReplicaSpecs {
				f(&spec.Template)
			}
		}
	}
	cases := []struct {
		name string
		set  func(*JobRequest)
		want func(*kubeflow.MPIJob)
	}{{
		name: "--env",
		set:  func(r *JobRequest) { r.Env = []string{"NCCL_DEBUG=INFO", "EMPTY=", "EXPR=a=b"} },
		want: both(func(t *corev1.PodTemplateSpec) {
			t.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "NCCL_DEBUG", Value: "INFO"}, {Name: "EMPTY"}, {Name: "EXPR", Value: "a=b"}}
		}),
	}, {
		name: "--volume",
		set: func(r *JobRequest) {
			r.Volumes = []string{"pvc:imagenet:/data:ro", "hostpath:/mnt/cache:/cache", "configmap:settings:/etc/settings", "pvc:out:/out"}
		},
		want: both(func(t *corev1.PodTemplateSpec) {
			t.Spec.Volumes = []corev1.Volume{
				{Name: "volume-0", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "imagenet", ReadOnly: true}}},
				{Name: "volume-1", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/mnt/cache"}}},
				{Name: "volume-2", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
				{Name: "volume-3", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "out"}}},
			}
			t.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
				{Name: "volume-0", MountPath: "/data", ReadOnly: true},
				{Name: "volume-1", MountPath: "/cache"},
				{Name: "volume-2", MountPath: "/etc/settings"},
				{Name: "volume-3", MountPath: "/out"},
			}
		}),
	}, {
		name: "--node-selector",
		set:  func(r *JobRequest) { r.NodeSelector = []string{"pool=gpu", "topology.kubernetes.io/zone=z1"} },
		want: both(func(t *corev1.PodTemplateSpec) {
			t.Spec.NodeSelector = map[string]string{"pool": "gpu", "topology.kubernetes.io/zone": "z1"}
		}),
	}, {
		name: "--toleration",
		set: func(r *JobRequest) {
			r.Tolerations = []string{"nvidia.com/gpu:NoSchedule", "dedicated=ml:NoExecute", "spot=true", "maintenance"}
		},
		want: both(func(t *corev1.PodTemplateSpec) {
			t.Spec.Tolerations = []corev1.Toleration{
				{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "ml", Effect: corev1.TaintEffectNoExecute},
				{Key: "spot", Operator: corev1.TolerationOpEqual, Value: "true"},
				{Key: "maintenance", Operator: corev1.TolerationOpExists},
			}
		}),
	}, {
		name: "--image-pull-secret",
		set:  func(r *JobRequest) { r.ImagePullSecrets = []string{"registry", "mirror"} },
		want: both(func(t *corev1.PodTemplateSpec) {
			t.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}, {Name: "mirror"}}
		}),
	}, {
		name: "--label and --annotation",
		set: func(r *JobRequest) {
			r.Labels = []string{"team=vision", "example.com/tier=batch"}
			r.Annotations = []string{"owner=ana@example.com", "note=a, b = c"}
		},
		want: func(j *kubeflow.MPIJob) {
			labels := map[string]string{"team": "vision", "example.com/tier": "batch"}
			annotations := map[string]string{"owner": "ana@example.com", "note": "a, b = c"}
			j.Labels, j.Annotations = labels, annotations
			both(func(t *corev1.PodTemplateSpec) { t.Labels, t.Annotations = labels, annotations })(j)
		},
	}, {
		name: "--launcher-cpu and --launcher-memory",
		set:  func(r *JobRequest) { r.LauncherCPU, r.LauncherMemory = "500m", "1Gi" },
		want: func(j *kubeflow.MPIJob) {
			q := resource.MustParse
			j.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher].Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{"cpu": q("500m"), "memory": q("1Gi")},
				Requests: corev1.ResourceList{"cpu": q("500m"), "memory": q("1Gi")},
			}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := base
			tc.set(&req)
			got, err := BuildJob(req)
			if err != nil {
				t.Fatal(err)
			}
			want := wantJob(horovodrun("2", "1", "2", "python", "train.py"), corev1.ResourceRequirements{}, 1, 1, 2, 30)
			tc.want(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("BuildJob (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBuildV2beta1JobPodOptions: every pod option at once in a v2beta1
// job, against the whole job.
func TestBuildV2beta1JobPodOptions(t *testing.T) {
	got, err := BuildV2beta1Job(JobRequest{Name: "mnist", Namespace: "ml", Image: "horovod:1", Workers: 2, Command: []string{"python"},
		LauncherCPU: "1", LauncherMemory: "2Gi",
		PodOptions: PodOptions{
			Env: []string{"A=1"}, Volumes: []string{"pvc:data:/data"}, NodeSelector: []string{"pool=gpu"},
			Tolerations: []string{"spot:NoSchedule"}, ImagePullSecrets: []string{"registry"},
			Labels: []string{"team=vision"}, Annotations: []string{"owner=ana"},
		}})
	if err != nil {
		t.Fatal(err)
	}
	q := resource.MustParse
	template := func(c corev1.Container) corev1.PodTemplateSpec {
		c.Env = []corev1.EnvVar{{Name: "A", Value: "1"}}
		c.VolumeMounts = []corev1.VolumeMount{{Name: "volume-0", MountPath: "/data"}}
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"team": "vision"}, Annotations: map[string]string{"owner": "ana"}},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{c},
				Volumes: []corev1.Volume{{Name: "volume-0", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
				NodeSelector:     map[string]string{"pool": "gpu"},
				Tolerations:      []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
				ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry"}},
			},
		}
	}
	want := &V2beta1Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "kubeflow.org/v2beta1", Kind: "MPIJob"},
		ObjectMeta: metav1.ObjectMeta{Name: "mnist", Namespace: "ml",
			Labels: map[string]string{"team": "vision"}, Annotations: map[string]string{"owner": "ana"}},
		Spec: V2beta1JobSpec{
			SlotsPerWorker: ptrTo[int32](1),
			RunPolicy:      V2beta1RunPolicy{CleanPodPolicy: ptrTo(common.CleanPodPolicyRunning)},
			ElasticPolicy:  &kubeflow.ElasticPolicy{MinReplicas: ptrTo[int32](1), MaxReplicas: ptrTo[int32](2), DrainSeconds: ptrTo[int32](30)},
			MPIReplicaSpecs: map[common.ReplicaType]*common.ReplicaSpec{
				"Launcher": {Replicas: ptrTo[int32](1), Template: template(corev1.Container{
					Name: "mpi-launcher", Image: "horovod:1", Command: horovodrunV2beta1("2", "1", "2", "python"),
					Resources: corev1.ResourceRequirements{
						Limits:   corev1.ResourceList{"cpu": q("1"), "memory": q("2Gi")},
						Requests: corev1.ResourceList{"cpu": q("1"), "memory": q("2Gi")},
					},
				})},
				"Worker": {Replicas: ptrTo[int32](2), Template: template(corev1.Container{
					Name: "mpi-worker", Image: "horovod:1", Command: SSHDCommand, Args: SSHDArgs,
				})},
			},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("BuildV2beta1Job (-want +got):\n%s", diff)
	}
}

// TestBuildJobRefusesPodOptions: options the API server would refuse, or
// that would clash with the operator's mounts, are refused with the flag
// named.
func TestBuildJobRefusesPodOptions(t *testing.T) {
	cases := []struct {
		name string
		api  API
		set  func(*JobRequest)
		want string // the error, or its start where apimachinery's validation speaks
	}{
		{"env without =", APIv1, func(r *JobRequest) { r.Env = []string{"A"} }, `invalid --env "A": KEY=VALUE expected`},
		{"env name", APIv1, func(r *JobRequest) { r.Env = []string{"1A=x"} }, `invalid --env "1A=x": a valid environment variable name must consist of`},
		{"env twice", APIv1, func(r *JobRequest) { r.Env = []string{"A=1", "A=2"} }, `invalid --env "A=2": A is given twice`},
		{"volume type", APIv1, func(r *JobRequest) { r.Volumes = []string{"nfs:server:/data"} }, `invalid --volume "nfs:server:/data": unknown type "nfs": pvc, hostpath or configmap`},
		{"volume without path", APIv1, func(r *JobRequest) { r.Volumes = []string{"pvc:data"} }, `invalid --volume "pvc:data": TYPE:SOURCE:PATH[:ro] expected, such as pvc:data:/data, hostpath:/mnt/data:/data:ro or configmap:settings:/etc/settings`},
		{"volume mode", APIv1, func(r *JobRequest) { r.Volumes = []string{"pvc:data:/data:rw"} }, `invalid --volume "pvc:data:/data:rw": TYPE:SOURCE:PATH[:ro] expected`},
		{"claim name", APIv1, func(r *JobRequest) { r.Volumes = []string{"pvc:Data:/data"} }, `invalid --volume "pvc:Data:/data": Data: a lowercase RFC 1123 subdomain`},
		{"relative host path", APIv1, func(r *JobRequest) { r.Volumes = []string{"hostpath:data:/data"} }, `invalid --volume "hostpath:data:/data": the node's directory "data" must be an absolute path`},
		{"relative mount path", APIv1, func(r *JobRequest) { r.Volumes = []string{"configmap:c:data"} }, `invalid --volume "configmap:c:data": the mount path "data" must be an absolute path`},
		{"two at one path", APIv1, func(r *JobRequest) { r.Volumes = []string{"pvc:a:/data", "pvc:b:/data/"} }, `invalid --volume "pvc:b:/data/": another --volume is mounted at /data/`},
		{"the job's files", APIv1, func(r *JobRequest) { r.Volumes = []string{"pvc:a:/etc/mpi"} }, `invalid --volume "pvc:a:/etc/mpi": the operator mounts /etc/mpi itself`},
		{"under the job's files", APIv2beta1, func(r *JobRequest) { r.Volumes = []string{"pvc:a:/etc/mpi/more"} }, `invalid --volume "pvc:a:/etc/mpi/more": the operator mounts /etc/mpi itself`},
		{"v1's kubectl", APIv1, func(r *JobRequest) { r.Volumes = []string{"pvc:a:/opt/kube"} }, `invalid --volume "pvc:a:/opt/kube": the operator mounts /opt/kube itself`},
		{"v2beta1's SSH keys", APIv2beta1, func(r *JobRequest) { r.Volumes = []string{"pvc:a:/root/.ssh"} }, `invalid --volume "pvc:a:/root/.ssh": the operator mounts /root/.ssh itself`},
		{"node selector without =", APIv1, func(r *JobRequest) { r.NodeSelector = []string{"gpu"} }, `invalid --node-selector "gpu": KEY=VALUE expected`},
		{"node selector value", APIv1, func(r *JobRequest) { r.NodeSelector = []string{"pool=a b"} }, `invalid --node-selector "pool=a b": a valid label must be`},
		{"toleration effect", APIv1, func(r *JobRequest) { r.Tolerations = []string{"spot:Never"} }, `invalid --toleration "spot:Never": unknown effect "Never": NoSchedule, PreferNoSchedule or NoExecute; KEY[=VALUE][:EFFECT] expected, such as nvidia.com/gpu:NoSchedule or dedicated=ml:NoExecute`},
		{"toleration key", APIv1, func(r *JobRequest) { r.Tolerations = []string{"=x"} }, `invalid --toleration "=x": name part must be non-empty`},
		{"pull secret", APIv1, func(r *JobRequest) { r.ImagePullSecrets = []string{"My_Secret"} }, `invalid --image-pull-secret "My_Secret": a lowercase RFC 1123 subdomain`},
		{"label value", APIv1, func(r *JobRequest) { r.Labels = []string{"team=a/b"} }, `invalid --label "team=a/b": a valid label must be`},
		{"annotation key", APIv1, func(r *JobRequest) { r.Annotations = []string{"a b=c"} }, `invalid --annotation "a b=c": name part must consist of`},
		{"launcher CPU", APIv1, func(r *JobRequest) { r.LauncherCPU = "lots" }, `invalid --launcher-cpu "lots": quantities must match`},
		{"launcher memory", APIv1, func(r *JobRequest) { r.LauncherMemory = "-1Gi" }, `invalid --launcher-memory "-1Gi": must be positive`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := JobRequest{Name: "mnist", Image: "horovod:1", Workers: 2, Command: []string{"python"}}
			tc.set(&req)
			_, err := buildObject(tc.api, req)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error = %v\nwant %q", err, tc.want)
			}
		})
	}
}
