package reconcile

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
)

// PodWrites creates, annotates and deletes the pods of jobs. Each write
// tells Expectations first, under the owner's key (namespace/name), since
// the informer's event may come before the request returns, and takes the
// expectation back when the request changed nothing: so that no sync
// repeats a pod write that the cache does not show yet.
type PodWrites struct {
	Client       kubernetes.Interface
	Lister       corelisters.PodLister // the cache the expectations are about
	Expectations *Expectations
}

// RestartPolicyOf is the restart policy of a pod whose replica spec asks
// for policy, upstream's Always, OnFailure, Never or ExitCode. ExitCode is
// the controller's to act on, so such pods never restart by themselves.
func RestartPolicyOf[P ~string](policy P) corev1.RestartPolicy {
	switch corev1.RestartPolicy(policy) {
	case corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure:
		return corev1.RestartPolicy(policy)
	default:
		return corev1.RestartPolicyNever
	}
}

// Create creates one of the owner's pods. A pod of that name that the owner
// does not control is reported as a ForeignError.
func (w *PodWrites) Create(ctx context.Context, owner Owner, pod *corev1.Pod) (*corev1.Pod, error) {
	key := owner.Key()
	w.Expectations.ExpectCreate(key, pod.Name)
	created, err := w.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err == nil {
		return created, nil
	}
	w.Expectations.ObserveCreate(key, pod.Name)
	if apierrors.IsAlreadyExists(err) {
		live, getErr := w.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		switch {
		case getErr != nil:
		case !metav1.IsControlledBy(live, owner.Object):
			return nil, NewForeignError(owner, "Pod", pod.Name)
		case Relabel(live, pod.Labels):
			return w.adopt(ctx, key, live)
		}
	}
	return nil, fmt.Errorf("creating pod %s: %w", pod.Name, err)
}

// adopt gives back to pod, one of the owner's (key) that lost its labels,
// the labels it was created with (Relabel set them), so that the pod
// informer shows it again; the sync waits for that as for a creation.
func (w *PodWrites) adopt(ctx context.Context, key string, pod *corev1.Pod) (*corev1.Pod, error) {
	w.Expectations.ExpectCreate(key, pod.Name)
	patched, err := w.relabel(ctx, pod.Namespace, pod.Name, pod.ResourceVersion, pod.Labels)
	if err != nil {
		w.Expectations.ObserveCreate(key, pod.Name)
	}
	return patched, err
}

// relabel sets labels on the pod ns/name, unless it changed since
// resourceVersion.
func (w *PodWrites) relabel(ctx context.Context, ns, name, resourceVersion string, labels map[string]string) (*corev1.Pod, error) {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels": labels, "resourceVersion": resourceVersion}})
	if err != nil {
		return nil, err
	}
	patched, err := w.Client.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("restoring the labels of pod %s: %w", name, err)
	}
	klog.FromContext(ctx).Info("Restored the labels of a pod of the job's", "pod", klog.KObj(patched))
	return patched, nil
}

// Annotate sets one annotation of one of the owner's pods. A pod that is
// gone already needs none: it returns nil and no error.
func (w *PodWrites) Annotate(ctx context.Context, owner Owner, pod *corev1.Pod, name, value string) (*corev1.Pod, error) {
	key := owner.Key()
	w.Expectations.ExpectChange(key, pod.UID, ShowsAnnotation(name, value))
	patched, err := w.annotate(ctx, pod, name, value)
	if err != nil || patched == nil {
		w.Expectations.ObserveGone(key, pod.UID)
		return nil, err
	}
	if cached, err := w.Lister.Pods(pod.Namespace).Get(pod.Name); err == nil && cached.UID == pod.UID {
		// The cache may show the result already: an event came before this
		// check did, or the patch changed nothing (another write had set
		// the same value) and no event will come.
		w.Expectations.Observe(key, cached)
	}
	return patched, nil
}

// AnnotateUntracked is Annotate without an expectation, for a change that
// no sync decides anything on (a nudge to the kubelet, say): no sync waits
// for the cache to show it, and the caller must keep a repeat from a stale
// cache cheap or avoid it itself.
func (w *PodWrites) AnnotateUntracked(ctx context.Context, pod *corev1.Pod, name, value string) (*corev1.Pod, error) {
	return w.annotate(ctx, pod, name, value)
}

func (w *PodWrites) annotate(ctx context.Context, pod *corev1.Pod, name, value string) (*corev1.Pod, error) {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{name: value}}})
	if err != nil {
		return nil, err
	}
	patched, err := w.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("annotating pod %s: %w", pod.Name, err)
	}
	return patched, nil
}

// Delete deletes exactly this pod: not a newer one of the same name. A pod
// gone already, or replaced by a newer one, is no error.
func (w *PodWrites) Delete(ctx context.Context, owner Owner, pod *corev1.Pod) error {
	key, uid := owner.Key(), pod.UID
	w.Expectations.ExpectChange(key, uid, ShowsDeletion)
	err := w.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid},
	})
	if err == nil {
		return nil
	}
	// Nothing changed, so no event will come for it.
	w.Expectations.ObserveGone(key, uid)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return fmt.Errorf("deleting pod %s: %w", pod.Name, err)
}

// CountPhases counts pods as a replica status does: the Running ones that
// are not being deleted are active; the Succeeded and Failed ones count
// whether or not they are.
func CountPhases(pods []*corev1.Pod) (active, succeeded, failed int32) {
	for _, p := range pods {
		switch p.Status.Phase {
		case corev1.PodRunning:
			if p.DeletionTimestamp == nil {
				active++
			}
		case corev1.PodSucceeded:
			succeeded++
		case corev1.PodFailed:
			failed++
		}
	}
	return active, succeeded, failed
}
