package controller

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/pkg/reconcile"
)

// listingBytesPerSecond bounds how fast one job's ConfigMap is rewritten
// to add hosts. Every write carries the whole host list, so a job whose
// workers turn Running a few at a time would otherwise write bytes
// quadratic in its workers; paced, it writes bytes in proportion to the
// time its workers take to start. A job of a hundred workers waits a few
// milliseconds at most, one of 5,000 about a fifth of a second. Writes
// that take hosts out are never held back.
const listingBytesPerSecond = 1 << 20

// syncConfigMap writes the job's /etc/mpi files and bookkeeping, if they
// changed, through w. A write that only adds hosts may be held back (see
// listingBytesPerSecond): it is then left to the discovery queue, and the
// ConfigMap as it is comes back.
func (c *MPIJobController) syncConfigMap(ctx context.Context, w writePath, job *kubeflow.MPIJob, hosts elastic.Hosts, state elastic.State) (*corev1.ConfigMap, error) {
	want := newConfigMap(job, hosts, state)
	key := jobKey(job)
	cur, err := c.cmLister.ConfigMaps(job.Namespace).Get(want.Name)
	if err != nil || !metav1.IsControlledBy(cur, job) {
		cur = nil
	}
	now := c.clock.Now()
	// The cheap test first: most syncs come long after the last write,
	// and the scripts of a large job take a while to parse.
	if wait := c.cmWrites.wait(key, now); wait > 0 && cur != nil &&
		elastic.OnlyAddsHosts(cur.Data[discoverHostsKey], want.Data[discoverHostsKey]) {
		klog.FromContext(ctx).V(4).Info("Adding hosts held back", "wait", wait)
		c.discoveryQueue.AddAfter(key, wait)
		return cur, nil
	}
	written, err := reconcile.Ensure(ctx, owner(job), c.configMapChild(w.kube, job), want)
	if err == nil && written != cur { // the same object: nothing written
		c.cmWrites.wrote(key, now, dataBytes(written))
	}
	return written, err
}

func dataBytes(cm *corev1.ConfigMap) int {
	n := 0
	for k, v := range cm.Data {
		n += len(k) + len(v)
	}
	return n
}

// configMapWrites remembers, per job, the last ConfigMap write: when and
// how large.
type configMapWrites struct{ last sync.Map } // job key -> configMapWrite

type configMapWrite struct {
	at    time.Time
	bytes int
}

func (w *configMapWrites) wrote(key string, at time.Time, bytes int) {
	w.last.Store(key, configMapWrite{at: at, bytes: bytes})
}

// wait is how long a write that adds hosts waits: until the last write's
// bytes have been paid for at listingBytesPerSecond.
func (w *configMapWrites) wait(key string, now time.Time) time.Duration {
	v, ok := w.last.Load(key)
	if !ok {
		return 0
	}
	last := v.(configMapWrite)
	due := last.at.Add(time.Duration(last.bytes) * time.Second / listingBytesPerSecond)
	return max(due.Sub(now), 0)
}

// Forget drops the last write of key, a job that is gone.
func (w *configMapWrites) Forget(key string) { w.last.Delete(key) }

// Holds tells whether a write of key is remembered.
func (w *configMapWrites) Holds(key string) bool {
	_, ok := w.last.Load(key)
	return ok
}

// recordedState reads the bookkeeping from the job's ConfigMap; the zero
// state when there is none.
func (c *MPIJobController) recordedState(job *kubeflow.MPIJob) elastic.State {
	cm, err := c.cmLister.ConfigMaps(job.Namespace).Get(configMapName(job))
	if err != nil || !metav1.IsControlledBy(cm, job) {
		return elastic.State{}
	}
	return elastic.ParseState(cm.Annotations)
}

// configMapChild writes through client; an elastic job's hostfile that
// only gains hosts waits for the next write (elastic.MergeElasticFiles).
func (c *MPIJobController) configMapChild(client kubernetes.Interface, job *kubeflow.MPIJob) reconcile.Child[*corev1.ConfigMap] {
	merge := elastic.MergeFiles
	if job.Spec.ElasticPolicy != nil {
		merge = elastic.MergeElasticFiles
	}
	return reconcile.ChildOf("ConfigMap", func(ns, name string) (*corev1.ConfigMap, error) { return c.cmLister.ConfigMaps(ns).Get(name) },
		func(ns string) reconcile.TypedClient[*corev1.ConfigMap] { return client.CoreV1().ConfigMaps(ns) },
		merge)
}
