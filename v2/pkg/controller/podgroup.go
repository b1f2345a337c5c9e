package controller

import (
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	// The scheduler-plugins API types are typed, not unstructured: their
	// package imports only k8s.io/api and k8s.io/apimachinery and builds
	// with this module's k8s.io versions. The scheduler-plugins module does
	// require k8s.io/kubernetes, but module graph pruning keeps it out of
	// this module's build list and go.mod.
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// newVolcanoPodGroup asks volcano to start at least minMember of the job's
// pods together, with the scheduling policy's settings. Where the policy
// names no queue or priority class, the places the upstream operator read
// them from still count: the job's volcano queue annotation, and the
// launcher's (else the workers') priorityClassName.
func newVolcanoPodGroup(job *v2beta1.MPIJob) *volcanov1beta1.PodGroup {
	minMember := podGroupMinMember(job)
	pg := &volcanov1beta1.PodGroup{
		ObjectMeta: childMeta(job, podGroupName(job)),
		Spec: volcanov1beta1.PodGroupSpec{
			MinMember:         minMember,
			Queue:             job.Annotations[annotationVolcanoQueue],
			PriorityClassName: templatePriorityClass(job),
		},
	}
	if sp := job.Spec.RunPolicy.SchedulingPolicy; sp != nil {
		if sp.Queue != "" {
			pg.Spec.Queue = sp.Queue
		}
		if sp.PriorityClass != "" {
			pg.Spec.PriorityClassName = sp.PriorityClass
		}
	}
	if res := podGroupMinResources(job, minMember); res != nil {
		pg.Spec.MinResources = &res
	}
	return pg
}

// newSchedulerPluginsPodGroup asks the coscheduling plugin to start at
// least minMember of the job's pods together, giving up on the gang after
// the scheduling policy's timeout; without one, the timeout is 0, the
// plugin's default, written out as upstream's operator writes it.
func newSchedulerPluginsPodGroup(job *v2beta1.MPIJob) *schedv1alpha1.PodGroup {
	minMember := podGroupMinMember(job)
	pg := &schedv1alpha1.PodGroup{
		ObjectMeta: childMeta(job, podGroupName(job)),
		Spec: schedv1alpha1.PodGroupSpec{
			MinMember:              minMember,
			MinResources:           podGroupMinResources(job, minMember),
			ScheduleTimeoutSeconds: ptr[int32](0),
		},
	}
	if sp := job.Spec.RunPolicy.SchedulingPolicy; sp != nil && sp.ScheduleTimeoutSeconds != nil {
		pg.Spec.ScheduleTimeoutSeconds = clonePtr(sp.ScheduleTimeoutSeconds)
	}
	return pg
}

// podGroupMinMember is the scheduling policy's minAvailable, else the pods
// of the gang: the launcher and the workers, for an elastic job only
// minReplicas workers. A launcher created once the workers are Ready is not
// counted: the gang would wait for it while it waits for the workers.
func podGroupMinMember(job *v2beta1.MPIJob) int32 {
	if sp := job.Spec.RunPolicy.SchedulingPolicy; sp != nil && sp.MinAvailable != nil {
		return *sp.MinAvailable
	}
	workers := workerReplicas(job)
	if ep := job.Spec.ElasticPolicy; ep != nil {
		workers = min(workers, *ep.MinReplicas)
	}
	return max(1, gangLaunchers(job)+workers)
}

// podGroupMinResources is the scheduling policy's minResources, else the
// sum of the requests of the first minMember pods, the launcher (when the
// gang counts it) first, then workers. nil when that sum is empty.
func podGroupMinResources(job *v2beta1.MPIJob, minMember int32) corev1.ResourceList {
	if sp := job.Spec.RunPolicy.SchedulingPolicy; sp != nil && sp.MinResources != nil {
		return sp.MinResources.DeepCopy()
	}
	total := corev1.ResourceList{}
	left := minMember
	if launchers := min(left, gangLaunchers(job)); launchers > 0 {
		addRequests(total, &job.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeLauncher].Template.Spec, launchers)
		left -= launchers
	}
	if workers := min(left, workerReplicas(job)); workers > 0 {
		addRequests(total, &job.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeWorker].Template.Spec, workers)
	}
	if len(total) == 0 {
		return nil
	}
	return total
}

// gangLaunchers is how many launchers the gang holds: 1, or 0 when the
// launcher is created only once the workers are Ready.
func gangLaunchers(job *v2beta1.MPIJob) int32 {
	if job.Spec.LauncherCreationPolicy == v2beta1.LauncherCreationPolicyWaitForWorkersReady {
		return 0
	}
	return 1
}

// workerReplicas is the number of workers the job asks for; 0 without a
// Worker spec.
func workerReplicas(job *v2beta1.MPIJob) int32 {
	if spec := job.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeWorker]; spec != nil {
		return *spec.Replicas
	}
	return 0
}

// addRequests adds to total n times the requests of a pod of spec.
func addRequests(total corev1.ResourceList, spec *corev1.PodSpec, n int32) {
	for name, q := range podSpecRequests(spec) {
		q.Mul(int64(n))
		sum := total[name]
		sum.Add(q)
		total[name] = sum
	}
}

// podSpecRequests is what a scheduler reserves for a pod of spec. The API
// server has not defaulted a template, so a limit without a request counts
// as that request, as it will in the pod; init containers, sidecars,
// pod-level resources and overhead count as the scheduler counts them.
func podSpecRequests(spec *corev1.PodSpec) corev1.ResourceList {
	pod := &corev1.Pod{Spec: *spec.DeepCopy()}
	for _, containers := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range containers {
			defaultRequests(&containers[i].Resources)
		}
	}
	if pod.Spec.Resources != nil {
		defaultRequests(pod.Spec.Resources)
	}
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

// defaultRequests sets the request of every resource that has a limit and
// no request to the limit, as the API server does.
func defaultRequests(r *corev1.ResourceRequirements) {
	for name, limit := range r.Limits {
		if _, ok := r.Requests[name]; ok {
			continue
		}
		if r.Requests == nil {
			r.Requests = corev1.ResourceList{}
		}
		r.Requests[name] = limit.DeepCopy()
	}
}

// templatePriorityClass is the launcher template's priorityClassName, or
// the workers' when the launcher has none.
func templatePriorityClass(job *v2beta1.MPIJob) string {
	for _, rt := range []v2beta1.MPIReplicaType{v2beta1.MPIReplicaTypeLauncher, v2beta1.MPIReplicaTypeWorker} {
		if spec := job.Spec.MPIReplicaSpecs[rt]; spec != nil && spec.Template.Spec.PriorityClassName != "" {
			return spec.Template.Spec.PriorityClassName
		}
	}
	return ""
}
