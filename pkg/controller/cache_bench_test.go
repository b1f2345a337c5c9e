package controller

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeflow/mpi-operator/pkg/podcache"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// servedWorker returns worker index of job as a watch delivers it once the
// pod runs on a simulated node: the API server's defaults, the scheduler's
// and the kubelet's status, and the managed fields of each writer.
func servedWorker(job string, index int) *corev1.Pod {
	j := defaulted(newTestJob(job, 100))
	j.UID = types.UID(fmt.Sprintf("4f6c2a9e-%04d-4b1e-9a57-3c8d2e1f0a6b", len(job)))
	pod := newWorker(j, index, "")
	now := metav1.NewTime(time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC))
	pod.UID = types.UID(fmt.Sprintf("9b1d7c3e-%04d-4e2a-8f61-%012d", index, index))
	pod.ResourceVersion = fmt.Sprint(1_000_000 + index)
	pod.CreationTimestamp = now
	for _, m := range []string{"mpi-operator", "kube-scheduler", "kwok"} {
		pod.ManagedFields = append(pod.ManagedFields, metav1.ManagedFieldsEntry{
			Manager: m, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &now,
			FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{".":{},"f:group-name":{},"f:mpi-job-name":{},` +
				`"f:mpi-job-role":{},"f:replica-index":{}},"f:ownerReferences":{}},"f:spec":{"f:containers":{}}}`)},
		})
	}
	spec := &pod.Spec
	spec.NodeName = fmt.Sprintf("kwok-node-%d", index%46)
	spec.SchedulerName = corev1.DefaultSchedulerName
	spec.DNSPolicy = corev1.DNSClusterFirst
	spec.ServiceAccountName = "default"
	spec.DeprecatedServiceAccount = "default"
	spec.TerminationGracePeriodSeconds = ptr[int64](30)
	spec.SecurityContext = &corev1.PodSecurityContext{}
	spec.EnableServiceLinks = ptr(true)
	spec.Priority = ptr[int32](0)
	spec.PreemptionPolicy = ptr(corev1.PreemptLowerPriority)
	for _, key := range []string{"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"} {
		spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr[int64](300)})
	}
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "kube-api-access-x7k2p", VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr[int32](0644), Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr[int64](3607)}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
		}},
	}})
	for i := range spec.Containers {
		c := &spec.Containers[i]
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
		c.ImagePullPolicy = corev1.PullIfNotPresent
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "kube-api-access-x7k2p", ReadOnly: true,
			MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"})
	}
	ip := fmt.Sprintf("10.244.%d.%d", index/250, index%250)
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, HostIP: "127.0.0.1", HostIPs: []corev1.HostIP{{IP: "127.0.0.1"}},
		PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, StartTime: &now, QOSClass: corev1.PodQOSBurstable,
	}
	for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized,
		corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: t,
			Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	for _, c := range spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "docker-pullable://" + c.Image, Ready: true, Started: ptr(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	return pod
}

// BenchmarkCachedPod measures the heap that the pod informer's cache holds
// per worker pod: 10 jobs of 100 running workers, decoded from protobuf as
// the informer receives them, transformed, and stored in an indexer with the
// informer's indices.
func BenchmarkCachedPod(b *testing.B) {
	const jobs, perJob = 10, 100
	var wire [][]byte
	for j := range jobs {
		for i := range perJob {
			raw, err := servedWorker(fmt.Sprintf("train-%02d", j), i).Marshal()
			if err != nil {
				b.Fatal(err)
			}
			wire = append(wire, raw)
		}
	}
	for _, tc := range []struct {
		name      string
		transform func(cache.Store) cache.TransformFunc
	}{
		{"managed fields dropped", func(cache.Store) cache.TransformFunc { return podcache.DropManagedFields }},
		{"trimmed", func(cache.Store) cache.TransformFunc {
			return func(o any) (any, error) { return trimPod(o.(*corev1.Pod)), nil }
		}},
		{"trimmed and shared", func(s cache.Store) cache.TransformFunc { return newPodTrimmer(s).Transform }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var perPod float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{
					cache.NamespaceIndex:      cache.MetaNamespaceIndexFunc,
					reconcile.ByControllerUID: reconcile.ControllerUID,
				})
				transform := tc.transform(store)
				for _, raw := range wire {
					pod := &corev1.Pod{}
					if err := pod.Unmarshal(raw); err != nil {
						b.Fatal(err)
					}
					obj, err := transform(pod)
					if err != nil {
						b.Fatal(err)
					}
					if err := store.Add(obj); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				runtime.KeepAlive(store)
				perPod = float64(after.HeapAlloc-before.HeapAlloc) / float64(len(wire))
			}
			b.ReportMetric(perPod, "B/pod")
		})
	}
}

// BenchmarkGetWorkers measures a read of a job's 100 workers, from a cache
// of whole pods and from the pod cache's records, which are rebuilt into
// pods on every read.
func BenchmarkGetWorkers(b *testing.B) {
	for _, tc := range []struct {
		name      string
		transform func(cache.Store) cache.TransformFunc
	}{
		{"whole pods", func(cache.Store) cache.TransformFunc { return podcache.DropManagedFields }},
		{"cached records", func(s cache.Store) cache.TransformFunc { return newPodTrimmer(s).Transform }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			job := defaulted(newTestJob("train-00", 100))
			store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{
				cache.NamespaceIndex:      cache.MetaNamespaceIndexFunc,
				reconcile.ByControllerUID: reconcile.ControllerUID,
			})
			transform := tc.transform(store)
			for i := range 100 {
				pod := servedWorker(job.Name, i)
				job.UID = pod.OwnerReferences[0].UID
				obj, err := transform(pod)
				if err != nil {
					b.Fatal(err)
				}
				if err := store.Add(obj); err != nil {
					b.Fatal(err)
				}
			}
			c := &MPIJobController{podIndexer: store}
			b.ReportAllocs()
			for b.Loop() {
				if workers, err := c.getWorkers(job); err != nil || len(workers) != 100 {
					b.Fatalf("%d workers, %v", len(workers), err)
				}
			}
		})
	}
}
