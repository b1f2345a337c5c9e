package engine

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
)

// Refreshes remembers, per job, the last launcher refresh it sent: the
// pod, the version of it that the refresh was sent for, and the hash.
//
// A refresh annotates a running launcher pod with the hash of the
// discover_hosts.sh just written; the update of the pod makes the kubelet
// refresh its ConfigMap volume at once instead of at its next periodic
// sync. It is no expectation: no sync decides anything on the launcher's
// hash, so none waits for the cache to show it (under a busy API server
// that wait held back the files that list the job's next workers).
// Refreshes stands in for it against a repeat: a sync whose cache still
// shows the version of the pod a refresh was sent for does not send it
// again.
type Refreshes struct{ last sync.Map } // job key -> sentRefresh

type sentRefresh struct {
	uid             types.UID
	resourceVersion string
	hash            string
}

// RefreshLauncher annotates launcher, a pod of job key's, with the hash of
// script, unless it needs no refresh: it is not Running or is being
// deleted, it shows that hash, or the hash was sent to this version of it.
// It returns the pod as the API server holds it after the patch, else
// launcher itself.
func (e *Engine) RefreshLauncher(ctx context.Context, key string, launcher *corev1.Pod, script string) (*corev1.Pod, error) {
	hash := elastic.HostsHash(script)
	if launcher.Status.Phase != corev1.PodRunning || launcher.DeletionTimestamp != nil ||
		launcher.Annotations[elastic.AnnotationHostsHash] == hash || e.Launchers.sent(key, launcher, hash) {
		return launcher, nil
	}
	patched, err := e.Pods.AnnotateUntracked(ctx, launcher, elastic.AnnotationHostsHash, hash)
	if err != nil {
		return launcher, fmt.Errorf("refreshing the launcher: %w", err)
	}
	if patched == nil {
		return launcher, nil
	}
	e.Launchers.last.Store(key, sentRefresh{uid: launcher.UID, resourceVersion: launcher.ResourceVersion, hash: hash})
	klog.FromContext(ctx).V(4).Info("Refreshed the launcher's files", "pod", klog.KObj(launcher))
	return patched, nil
}

// sent tells whether hash was sent to this version of launcher.
func (r *Refreshes) sent(key string, launcher *corev1.Pod, hash string) bool {
	v, ok := r.last.Load(key)
	return ok && v.(sentRefresh) == sentRefresh{uid: launcher.UID, resourceVersion: launcher.ResourceVersion, hash: hash}
}

// Forget drops the last refresh of key, a job that is gone.
func (r *Refreshes) Forget(key string) { r.last.Delete(key) }

// Holds tells whether a refresh of key is remembered.
func (r *Refreshes) Holds(key string) bool {
	_, ok := r.last.Load(key)
	return ok
}
