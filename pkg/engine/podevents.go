package engine

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/metrics"
	"github.com/kubeflow/mpi-operator/pkg/podcache"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// PodEvents are the handlers of the informer of the pods an operator labels
// (a podcache.Trimmer's). Each event tells the expectations of the pod as
// it is, and enqueues its job, as jobOf names it (false: the pod is of no
// job): urgently when a worker (isWorker) may start or stop being listed,
// or when the pod shows the last of the sync's own changes.
func (b *Base) PodEvents(jobOf func(*corev1.Pod) (string, bool), isWorker func(*corev1.Pod) bool) cache.ResourceEventHandlerFuncs {
	observe := func(pod *corev1.Pod, gone, urgent bool) {
		key, ok := jobOf(pod)
		if !ok {
			return
		}
		b.Expectations.ObserveCreate(key, pod.Name)
		var settled bool
		if gone {
			b.Engine.Running.take(key, pod.UID)
			settled = b.Expectations.ObserveGone(key, pod.UID)
		} else {
			settled = b.Expectations.Observe(key, pod)
		}
		b.EnqueueChange(key, urgent, settled)
	}
	return podcache.Events(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pod, ok := obj.(*corev1.Pod); ok {
				observe(pod, false, false)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			oldPod, okOld := oldObj.(*corev1.Pod)
			pod, ok := newObj.(*corev1.Pod)
			if !ok || !okOld {
				return
			}
			if key, ok := jobOf(pod); ok && isWorker(pod) &&
				pod.Status.Phase == corev1.PodRunning && oldPod.Status.Phase != corev1.PodRunning {
				b.Engine.Running.store(key, pod.UID, b.Clock.Now())
			}
			observe(pod, false, elastic.DiscoverabilityChanged(oldPod, pod, isWorker))
		},
		DeleteFunc: func(obj any) {
			if pod, ok := reconcile.Untombstone(obj).(*corev1.Pod); ok {
				observe(pod, true, elastic.DiscoverabilityChanged(pod, nil, isWorker))
			}
		},
	})
}

// RunningSince remembers, per job, when the controller saw each of its
// workers turn Running, for the discovery latency histogram only. A
// worker's time is taken when the worker is listed or goes, and a job's
// times all go with the job.
type RunningSince struct {
	mu   sync.Mutex
	jobs map[string]map[types.UID]time.Time // job key -> worker UID -> time
}

func (r *RunningSince) store(key string, uid types.UID, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.jobs == nil {
		r.jobs = map[string]map[types.UID]time.Time{}
	}
	if r.jobs[key] == nil {
		r.jobs[key] = map[types.UID]time.Time{}
	}
	r.jobs[key][uid] = at
}

// take returns and forgets when uid, a worker of job key, was seen turning
// Running.
func (r *RunningSince) take(key string, uid types.UID) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.jobs[key][uid]
	delete(r.jobs[key], uid)
	if len(r.jobs[key]) == 0 {
		delete(r.jobs, key)
	}
	return at, ok
}

// Holds tells whether a worker of key is remembered.
func (r *RunningSince) Holds(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.jobs[key] != nil
}

// Forget drops the times of key's workers, a job that is gone.
func (r *RunningSince) Forget(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.jobs, key)
}

// observeDiscovery records, for the workers of job key that the files just
// written list, how long after turning Running they got there.
func (e *Engine) observeDiscovery(key string, ws []elastic.Worker, listed []string) {
	now := e.Clock.Now()
	in := make(map[string]bool, len(listed))
	for _, n := range listed {
		in[n] = true
	}
	for _, w := range ws {
		if !in[w.Pod.Name] {
			continue
		}
		if since, ok := e.Running.take(key, w.Pod.UID); ok {
			metrics.DiscoveryLatency.Observe(now.Sub(since).Seconds())
		}
	}
}

// OtherPodEvents are the handlers of the informer of the metadata of the
// pods an operator does not label: a pod that takes or frees the name of a
// job's pod (jobOfName names the job, if any job's pod would be called so)
// enqueues the job, if it exists (exists).
func (b *Base) OtherPodEvents(jobOfName func(pod string) (string, bool), exists func(namespace, name string) bool) cache.ResourceEventHandlerFuncs {
	handle := func(obj any) {
		m, ok := reconcile.Untombstone(obj).(metav1.Object)
		if !ok {
			return
		}
		if job, ok := jobOfName(m.GetName()); ok && exists(m.GetNamespace(), job) {
			b.Queue.Add(m.GetNamespace() + "/" + job)
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: handle, DeleteFunc: handle}
}
