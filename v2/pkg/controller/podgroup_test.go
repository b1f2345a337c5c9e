package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// withTestRequests gives the launcher 1 CPU and 1Gi, and each worker 2 CPUs,
// 4Gi and a GPU by its limit alone.
func withTestRequests(j *v2beta1.MPIJob) {
	launcher := &j.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeLauncher].Template.Spec.Containers[0]
	launcher.Resources.Requests = corev1.ResourceList{"cpu": resource.MustParse("1"), "memory": resource.MustParse("1Gi")}
	worker := &j.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeWorker].Template.Spec.Containers[0]
	worker.Resources.Requests = corev1.ResourceList{"cpu": resource.MustParse("2"), "memory": resource.MustParse("4Gi")}
	worker.Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
}

func testResources(cpu, memory, gpu string) corev1.ResourceList {
	r := corev1.ResourceList{"cpu": resource.MustParse(cpu), "memory": resource.MustParse(memory)}
	if gpu != "" {
		r["nvidia.com/gpu"] = resource.MustParse(gpu)
	}
	return r
}

// TestPodGroupSize checks minMember and minResources, which both kinds of
// PodGroup share, on whole PodGroups of both kinds.
func TestPodGroupSize(t *testing.T) {
	elastic := func(minReplicas int32) func(*v2beta1.MPIJob) {
		return func(j *v2beta1.MPIJob) {
			j.Spec.ElasticPolicy = &v2beta1.ElasticPolicy{MinReplicas: ptr(minReplicas)}
		}
	}
	minAvailable := func(n int32) func(*v2beta1.MPIJob) {
		return func(j *v2beta1.MPIJob) {
			j.Spec.RunPolicy.SchedulingPolicy = &v2beta1.SchedulingPolicy{MinAvailable: ptr(n)}
		}
	}
	cases := []struct {
		name          string
		workers       int32
		modify        []func(*v2beta1.MPIJob)
		wantMinMember int32
		wantResources corev1.ResourceList
	}{
		{
			name:    "the launcher and every worker",
			workers: 2, modify: []func(*v2beta1.MPIJob){withTestRequests},
			wantMinMember: 3, wantResources: testResources("5", "9Gi", "2"),
		},
		{
			name:    "elastic: the launcher and minReplicas workers",
			workers: 4, modify: []func(*v2beta1.MPIJob){withTestRequests, elastic(2)},
			wantMinMember: 3, wantResources: testResources("5", "9Gi", "2"),
		},
		{
			name:    "elastic with the default minReplicas",
			workers: 4, modify: []func(*v2beta1.MPIJob){withTestRequests, func(j *v2beta1.MPIJob) { j.Spec.ElasticPolicy = &v2beta1.ElasticPolicy{} }},
			wantMinMember: 2, wantResources: testResources("3", "5Gi", "1"),
		},
		{
			name:    "minAvailable: the launcher first, then workers",
			workers: 4, modify: []func(*v2beta1.MPIJob){withTestRequests, minAvailable(2)},
			wantMinMember: 2, wantResources: testResources("3", "5Gi", "1"),
		},
		{
			name:    "minAvailable 1: the launcher alone",
			workers: 4, modify: []func(*v2beta1.MPIJob){withTestRequests, minAvailable(1)},
			wantMinMember: 1, wantResources: testResources("1", "1Gi", ""),
		},
		{
			name:    "minAvailable over the job's pods: all of them",
			workers: 2, modify: []func(*v2beta1.MPIJob){withTestRequests, minAvailable(10)},
			wantMinMember: 10, wantResources: testResources("5", "9Gi", "2"),
		},
		{
			name:    "minAvailable wins over an elastic job's minimum",
			workers: 4, modify: []func(*v2beta1.MPIJob){withTestRequests, elastic(1), minAvailable(4)},
			wantMinMember: 4, wantResources: testResources("7", "13Gi", "3"),
		},
		{
			name:    "a launcher that waits for the workers is not in the gang",
			workers: 2, modify: []func(*v2beta1.MPIJob){withTestRequests, waitForWorkers},
			wantMinMember: 2, wantResources: testResources("4", "8Gi", "2"),
		},
		{
			name:    "no workers and a launcher that waits for them: a gang of one, no resources",
			workers: 0, modify: []func(*v2beta1.MPIJob){withTestRequests, waitForWorkers},
			wantMinMember: 1,
		},
		{
			name:    "the scheduling policy's minResources as they are",
			workers: 2,
			modify: []func(*v2beta1.MPIJob){withTestRequests, func(j *v2beta1.MPIJob) {
				j.Spec.RunPolicy.SchedulingPolicy = &v2beta1.SchedulingPolicy{MinResources: &corev1.ResourceList{"cpu": resource.MustParse("100")}}
			}},
			wantMinMember: 3, wantResources: corev1.ResourceList{"cpu": resource.MustParse("100")},
		},
		{
			name:          "no requests: no minResources",
			workers:       2,
			wantMinMember: 3,
		},
		{
			name:    "an init container larger than the containers, a sidecar and overhead",
			workers: 1,
			modify: []func(*v2beta1.MPIJob){withTestRequests, func(j *v2beta1.MPIJob) {
				spec := &j.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeLauncher].Template.Spec
				spec.InitContainers = []corev1.Container{
					{Name: "setup", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("3")}}},
					{
						Name:          "proxy",
						RestartPolicy: ptr(corev1.ContainerRestartPolicyAlways),
						Resources:     corev1.ResourceRequirements{Limits: corev1.ResourceList{"memory": resource.MustParse("1Gi")}},
					},
				}
				spec.Overhead = corev1.ResourceList{"memory": resource.MustParse("1Gi")}
			}},
			// launcher: cpu max(3, 1) = 3, memory 1Gi + the sidecar's 1Gi
			// + 1Gi overhead; a worker: 2, 4Gi, 1 GPU.
			wantMinMember: 2, wantResources: testResources("5", "7Gi", "1"),
		},
		{
			name:    "pod-level requests",
			workers: 1,
			modify: []func(*v2beta1.MPIJob){withTestRequests, func(j *v2beta1.MPIJob) {
				j.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeWorker].Template.Spec.Resources = &corev1.ResourceRequirements{
					Limits: corev1.ResourceList{"cpu": resource.MustParse("4"), "memory": resource.MustParse("8Gi")},
				}
			}},
			wantMinMember: 2, wantResources: testResources("5", "9Gi", "1"),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := newTestJob(tc.workers, tc.modify...)
			wantVolcano := &volcanov1beta1.PodGroup{
				ObjectMeta: testChildMeta("job"),
				Spec:       volcanov1beta1.PodGroupSpec{MinMember: tc.wantMinMember},
			}
			if tc.wantResources != nil {
				wantVolcano.Spec.MinResources = &tc.wantResources
			}
			if diff := cmp.Diff(wantVolcano, newVolcanoPodGroup(job)); diff != "" {
				t.Errorf("newVolcanoPodGroup (-want +got):\n%s", diff)
			}
			wantPlugins := &schedv1alpha1.PodGroup{
				ObjectMeta: testChildMeta("job"),
				Spec:       schedv1alpha1.PodGroupSpec{MinMember: tc.wantMinMember, MinResources: tc.wantResources, ScheduleTimeoutSeconds: ptr[int32](0)},
			}
			if diff := cmp.Diff(wantPlugins, newSchedulerPluginsPodGroup(job)); diff != "" {
				t.Errorf("newSchedulerPluginsPodGroup (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVolcanoPodGroupQueueAndPriority(t *testing.T) {
	cases := []struct {
		name                     string
		policy                   *v2beta1.SchedulingPolicy
		queueAnnotation          string
		launcherPrio, workerPrio string
		wantQueue, wantPrio      string
	}{
		{name: "none anywhere"},
		{
			name:            "upstream's places: the queue annotation, the launcher's priority class",
			queueAnnotation: "team-a", launcherPrio: "high", workerPrio: "low",
			wantQueue: "team-a", wantPrio: "high",
		},
		{
			name:       "the workers' priority class when the launcher has none",
			workerPrio: "low",
			wantPrio:   "low",
		},
		{
			name:            "the scheduling policy wins",
			policy:          &v2beta1.SchedulingPolicy{Queue: "research", PriorityClass: "urgent"},
			queueAnnotation: "team-a", launcherPrio: "high",
			wantQueue: "research", wantPrio: "urgent",
		},
		{
			name:            "a policy with only a queue keeps the template's priority class",
			policy:          &v2beta1.SchedulingPolicy{Queue: "research"},
			queueAnnotation: "team-a", launcherPrio: "high",
			wantQueue: "research", wantPrio: "high",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := newTestJob(2, func(j *v2beta1.MPIJob) {
				j.Spec.RunPolicy.SchedulingPolicy = tc.policy
				if tc.queueAnnotation != "" {
					j.Annotations = map[string]string{"scheduling.volcano.sh/queue-name": tc.queueAnnotation}
				}
				j.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeLauncher].Template.Spec.PriorityClassName = tc.launcherPrio
				j.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeWorker].Template.Spec.PriorityClassName = tc.workerPrio
			})
			want := &volcanov1beta1.PodGroup{
				ObjectMeta: testChildMeta("job"),
				Spec:       volcanov1beta1.PodGroupSpec{MinMember: 3, Queue: tc.wantQueue, PriorityClassName: tc.wantPrio},
			}
			if diff := cmp.Diff(want, newVolcanoPodGroup(job)); diff != "" {
				t.Errorf("newVolcanoPodGroup (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSchedulerPluginsPodGroupTimeout: the scheduling policy's timeout is
// carried, and its volcano-only fields are not. Without a timeout in the
// policy (or without a policy), the PodGroup says 0, as upstream's
// operator writes it: the plugin's own default.
func TestSchedulerPluginsPodGroupTimeout(t *testing.T) {
	for _, tc := range []struct {
		policy             *v2beta1.SchedulingPolicy
		minMember, timeout int32
	}{
		{&v2beta1.SchedulingPolicy{ScheduleTimeoutSeconds: ptr[int32](120), Queue: "volcano-only", PriorityClass: "volcano-only"}, 3, 120},
		{nil, 3, 0},
		{&v2beta1.SchedulingPolicy{MinAvailable: ptr[int32](2)}, 2, 0},
	} {
		job := newTestJob(2, func(j *v2beta1.MPIJob) { j.Spec.RunPolicy.SchedulingPolicy = tc.policy })
		want := &schedv1alpha1.PodGroup{
			ObjectMeta: testChildMeta("job"),
			Spec:       schedv1alpha1.PodGroupSpec{MinMember: tc.minMember, ScheduleTimeoutSeconds: ptr(tc.timeout)},
		}
		if diff := cmp.Diff(want, newSchedulerPluginsPodGroup(job)); diff != "" {
			t.Errorf("newSchedulerPluginsPodGroup with the scheduling policy %+v (-want +got):\n%s", tc.policy, diff)
		}
	}
}
