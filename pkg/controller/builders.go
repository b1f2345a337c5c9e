package controller

import (
	"fmt"
	"strconv"
	"strings"

	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
)

// The builders below are pure: they take a defaulted job and what the sync
// decided, and return the whole object it wants in the cluster.

func ownerRefs(job *kubeflow.MPIJob) []metav1.OwnerReference {
	return []metav1.OwnerReference{*metav1.NewControllerRef(job, kubeflow.SchemeGroupVersionKind)}
}

func objectMeta(job *kubeflow.MPIJob, name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       job.Namespace,
		Labels:          labels,
		OwnerReferences: ownerRefs(job),
	}
}

// newConfigMap returns the job's /etc/mpi files for the given hosts, with
// the elastic bookkeeping of state in its annotations.
func newConfigMap(job *kubeflow.MPIJob, hosts elastic.Hosts, state elastic.State) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:            configMapName(job),
			Namespace:       job.Namespace,
			Labels:          map[string]string{labelApp: job.Name},
			Annotations:     state.Annotations(),
			OwnerReferences: ownerRefs(job),
		},
		Data: map[string]string{
			hostfileKey:      hostfile(job, hosts.Desired),
			kubexecKey:       kubexecScript(job),
			discoverHostsKey: discoverHostsScript(job, hosts.Running),
		},
	}
}

func hostfile(job *kubeflow.MPIJob, workers []string) string {
	slots := *job.Spec.SlotsPerWorker
	var b strings.Builder
	if isGPULauncher(job) {
		fmt.Fprintf(&b, "%s slots=%d\n", launcherName(job), slots)
	}
	for _, w := range workers {
		fmt.Fprintf(&b, "%s slots=%d\n", w, slots)
	}
	return b.String()
}

func discoverHostsScript(job *kubeflow.MPIJob, workers []string) string {
	slots := *job.Spec.SlotsPerWorker
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	if isGPULauncher(job) {
		fmt.Fprintf(&b, "echo %s:%d\n", launcherName(job), slots)
	}
	for _, w := range workers {
		fmt.Fprintf(&b, "echo %s:%d\n", w, slots)
	}
	return b.String()
}

func kubexecScript(job *kubeflow.MPIJob) string {
	container := ""
	if job.Spec.MainContainer != "" {
		container = " --container " + job.Spec.MainContainer
	}
	return "#!/bin/sh\nPOD_NAME=$1\nshift\n" +
		kubectlMountPath + "/kubectl exec ${POD_NAME}" + container + " -- /bin/sh -c \"$*\"\n"
}

// isGPULauncher tells whether any launcher container asks for a GPU, in
// which case the launcher is a host of the job as well.
func isGPULauncher(job *kubeflow.MPIJob) bool {
	spec := job.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeLauncher]
	if spec == nil {
		return false
	}
	for _, c := range spec.Template.Spec.Containers {
		for name := range c.Resources.Limits {
			if strings.Contains(string(name), "gpu") {
				return true
			}
		}
	}
	return false
}

func newLauncherServiceAccount(job *kubeflow.MPIJob) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		ObjectMeta: objectMeta(job, launcherName(job), map[string]string{labelApp: job.Name}),
	}
}

// newLauncherRole lets the launcher read pods in its namespace and exec into
// exactly the named workers. With no workers there is no exec rule at all:
// an empty resourceNames list would allow every pod.
func newLauncherRole(job *kubeflow.MPIJob, workers []string) *rbacv1.Role {
	role := &rbacv1.Role{
		ObjectMeta: objectMeta(job, launcherName(job), nil),
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""},
			Resources: []string{"pods"},
			Verbs:     []string{"get", "list", "watch"},
		}},
	}
	if len(workers) > 0 {
		role.Rules = append(role.Rules, rbacv1.PolicyRule{
			APIGroups:     []string{""},
			Resources:     []string{"pods/exec"},
			Verbs:         []string{"create"},
			ResourceNames: workers,
		})
	}
	return role
}

func newLauncherRoleBinding(job *kubeflow.MPIJob) *rbacv1.RoleBinding {
	name := launcherName(job)
	return &rbacv1.RoleBinding{
		ObjectMeta: objectMeta(job, name, nil),
		Subjects: []rbacv1.Subject{{
			Kind:      rbacv1.ServiceAccountKind,
			Name:      name,
			Namespace: job.Namespace,
		}},
		RoleRef: rbacv1.RoleRef{
			APIGroup: rbacv1.GroupName,
			Kind:     "Role",
			Name:     name,
		},
	}
}

// newPodGroup asks volcano to start at least minMember of the job's pods
// together; the run policy's scheduling settings go with it. Where the
// policy names no queue or priority class, the places the upstream operator
// read them from still count: the job's volcano queue annotation, and the
// launcher's (else the workers') priorityClassName.
func newPodGroup(job *kubeflow.MPIJob, minMember int32) *volcanov1beta1.PodGroup {
	pg := &volcanov1beta1.PodGroup{
		ObjectMeta: objectMeta(job, job.Name, nil),
		Spec: volcanov1beta1.PodGroupSpec{
			MinMember:         minMember,
			Queue:             job.Annotations[volcanov1beta1.QueueNameAnnotationKey],
			PriorityClassName: templatePriorityClass(job),
		},
	}
	if rp := job.Spec.RunPolicy; rp != nil && rp.SchedulingPolicy != nil {
		sp := rp.SchedulingPolicy
		if sp.MinAvailable != nil {
			pg.Spec.MinMember = *sp.MinAvailable
		}
		if sp.Queue != "" {
			pg.Spec.Queue = sp.Queue
		}
		if sp.PriorityClass != "" {
			pg.Spec.PriorityClassName = sp.PriorityClass
		}
		if sp.MinResources != nil {
			res := sp.MinResources.DeepCopy()
			pg.Spec.MinResources = &res
		}
	}
	return pg
}

// templatePriorityClass is the launcher template's priorityClassName, or
// the workers' when the launcher has none.
func templatePriorityClass(job *kubeflow.MPIJob) string {
	for _, rt := range []common.ReplicaType{kubeflow.MPIReplicaTypeLauncher, kubeflow.MPIReplicaTypeWorker} {
		if spec := job.Spec.MPIReplicaSpecs[rt]; spec != nil && spec.Template.Spec.PriorityClassName != "" {
			return spec.Template.Spec.PriorityClassName
		}
	}
	return ""
}

// podRestartPolicy maps a replica's restart policy to the pod's. ExitCode is
// the controller's to act on, so its pods never restart by themselves.
func podRestartPolicy(spec *common.ReplicaSpec) corev1.RestartPolicy {
	switch spec.RestartPolicy {
	case common.RestartPolicyAlways:
		return corev1.RestartPolicyAlways
	case common.RestartPolicyOnFailure:
		return corev1.RestartPolicyOnFailure
	default:
		return corev1.RestartPolicyNever
	}
}

// mainContainerIndex is the container that kubectl exec enters: the one
// named by spec.mainContainer, else the first.
func mainContainerIndex(job *kubeflow.MPIJob, spec *corev1.PodSpec) int {
	for i, c := range spec.Containers {
		if c.Name == job.Spec.MainContainer {
			return i
		}
	}
	return 0
}

// newPodFromTemplate copies the replica's template and gives it the job's
// name, labels, owner and scheduling settings.
func newPodFromTemplate(job *kubeflow.MPIJob, rt common.ReplicaType, name, role string, gangScheduler string) *corev1.Pod {
	spec := job.Spec.MPIReplicaSpecs[rt]
	tmpl := spec.Template.DeepCopy()
	labels := tmpl.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range podLabels(job, role) {
		labels[k] = v
	}
	pod := &corev1.Pod{
		ObjectMeta: objectMeta(job, name, labels),
		Spec:       tmpl.Spec,
	}
	pod.Annotations = tmpl.Annotations
	pod.Spec.RestartPolicy = podRestartPolicy(spec)
	if gangScheduler != "" {
		pod.Spec.SchedulerName = gangScheduler
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[annotationVolcanoGroup] = job.Name
	}
	return pod
}

// newWorker returns worker pod number index. A main container without a
// command sleeps, waiting for the launcher's kubectl exec.
func newWorker(job *kubeflow.MPIJob, index int, gangScheduler string) *corev1.Pod {
	pod := newPodFromTemplate(job, kubeflow.MPIReplicaTypeWorker, workerName(job, index), roleWorker, gangScheduler)
	idx := strconv.Itoa(index)
	pod.Labels[labelReplicaIndex] = idx
	pod.Labels[common.ReplicaIndexLabel] = idx
	if len(pod.Spec.Containers) == 0 {
		return pod
	}
	main := &pod.Spec.Containers[mainContainerIndex(job, &pod.Spec)]
	if len(main.Command) == 0 {
		main.Command = []string{"sleep"}
		main.Args = []string{"365d"}
	}
	main.VolumeMounts = append(main.VolumeMounts, corev1.VolumeMount{
		Name: configVolumeName, MountPath: configMountPath,
	})
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{
		Name: configVolumeName,
		VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: configMapName(job)},
			Items:                []corev1.KeyToPath{{Key: kubexecKey, Path: kubexecKey, Mode: ptr[int32](0555)}},
		}},
	})
	return pod
}

// launcherOptions are the operator-wide and per-sync inputs of the launcher.
type launcherOptions struct {
	deliveryImage   string
	gangScheduler   string
	minReadyWorkers int32
	hostsHash       string
}

// newLauncher returns the launcher pod: its template plus the kubectl
// delivery init container, the /etc/mpi files and the MPI environment.
func newLauncher(job *kubeflow.MPIJob, opts launcherOptions) *corev1.Pod {
	pod := newPodFromTemplate(job, kubeflow.MPIReplicaTypeLauncher, launcherName(job), roleLauncher, opts.gangScheduler)
	if opts.hostsHash != "" {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[elastic.AnnotationHostsHash] = opts.hostsHash
	}
	pod.Spec.ServiceAccountName = launcherName(job)
	pod.Spec.InitContainers = append([]corev1.Container{newDeliveryContainer(job, opts)}, pod.Spec.InitContainers...)
	pod.Spec.Volumes = append(pod.Spec.Volumes,
		corev1.Volume{
			Name:         kubectlVolumeName,
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}},
		},
		corev1.Volume{
			Name: configVolumeName,
			VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: configMapName(job)},
				Items: []corev1.KeyToPath{
					{Key: hostfileKey, Path: hostfileKey, Mode: ptr[int32](0444)},
					{Key: kubexecKey, Path: kubexecKey, Mode: ptr[int32](0555)},
					{Key: discoverHostsKey, Path: discoverHostsKey, Mode: ptr[int32](0555)},
				},
			}},
		})
	if len(pod.Spec.Containers) == 0 {
		return pod
	}
	main := &pod.Spec.Containers[mainContainerIndex(job, &pod.Spec)]
	main.Env = append(main.Env,
		corev1.EnvVar{Name: "OMPI_MCA_plm_rsh_agent", Value: configMountPath + "/" + kubexecKey},
		corev1.EnvVar{Name: "OMPI_MCA_orte_default_hostfile", Value: configMountPath + "/" + hostfileKey},
	)
	if !isGPULauncher(job) {
		main.Env = append(main.Env,
			corev1.EnvVar{Name: "NVIDIA_VISIBLE_DEVICES"},
			corev1.EnvVar{Name: "NVIDIA_DRIVER_CAPABILITIES"},
		)
	}
	main.VolumeMounts = append(main.VolumeMounts,
		corev1.VolumeMount{Name: kubectlVolumeName, MountPath: kubectlMountPath},
		corev1.VolumeMount{Name: configVolumeName, MountPath: configMountPath},
	)
	return pod
}

// newDeliveryContainer copies kubectl for the launcher and waits until
// enough workers are Running and Ready.
func newDeliveryContainer(job *kubeflow.MPIJob, opts launcherOptions) corev1.Container {
	resources := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("100m"),
		corev1.ResourceMemory:           resource.MustParse("128Mi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("256Mi"),
	}
	return corev1.Container{
		Name:            kubectlDeliveryName,
		Image:           opts.deliveryImage,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Env: []corev1.EnvVar{
			{Name: "TARGET_DIR", Value: kubectlMountPath},
			{Name: "NAMESPACE", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"},
			}},
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"},
			}},
			{Name: "WORKER_SELECTOR", Value: workerSelector(job).String()},
			{Name: "MIN_READY_WORKERS", Value: strconv.Itoa(int(opts.minReadyWorkers))},
		},
		Resources: corev1.ResourceRequirements{Limits: resources, Requests: resources},
		VolumeMounts: []corev1.VolumeMount{
			{Name: kubectlVolumeName, MountPath: kubectlMountPath},
			{Name: configVolumeName, MountPath: configMountPath},
		},
	}
}

func ptr[T any](v T) *T { return &v }
