package plugin

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
)

// Workers are a snapshot's worker pods with what scaling asks of them.
type Workers struct {
	Pods   []corev1.Pod
	Listed map[string]bool
}

// WorkersOf picks the workers out of a snapshot.
func WorkersOf(s Snapshot) Workers {
	w := Workers{Listed: elastic.ListedPods(s.Hosts)}
	for _, p := range s.Pods {
		if p.Labels[s.API.LabelRole] == roleWorker {
			w.Pods = append(w.Pods, p)
		}
	}
	return w
}

// live tells whether a worker counts towards the job's replicas: not
// draining, not being deleted, not finished (as the operator counts them).
func live(p *corev1.Pod) bool {
	_, draining := p.Annotations[elastic.AnnotationDrainingSince]
	finished := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	return !draining && p.DeletionTimestamp == nil && !finished
}

// Live returns the names of the live workers.
func (w Workers) Live() []string {
	var names []string
	for i := range w.Pods {
		if live(&w.Pods[i]) {
			names = append(names, w.Pods[i].Name)
		}
	}
	return names
}

// Names returns the names of every worker pod.
func (w Workers) Names() []string {
	var names []string
	for _, p := range w.Pods {
		names = append(names, p.Name)
	}
	return names
}

// Ready returns the live workers that are Running and listed in
// discover_hosts.sh: those Horovod can use.
func (w Workers) Ready() []string {
	var names []string
	for i := range w.Pods {
		p := &w.Pods[i]
		if live(p) && p.Status.Phase == corev1.PodRunning && w.Listed[p.Name] {
			names = append(names, p.Name)
		}
	}
	return names
}

// Find returns the worker of that name.
func (w Workers) Find(name string) (*corev1.Pod, bool) {
	for i := range w.Pods {
		if w.Pods[i].Name == name {
			return &w.Pods[i], true
		}
	}
	return nil, false
}

// Gone tells whether every worker named has been deleted and left
// discover_hosts.sh.
func (w Workers) Gone(names []string) bool {
	for _, n := range names {
		if _, ok := w.Find(n); ok || w.Listed[n] {
			return false
		}
	}
	return true
}

// without returns the names not in exclude.
func without(names, exclude []string) []string {
	var out []string
	for _, n := range names {
		if !slices.Contains(exclude, n) {
			out = append(out, n)
		}
	}
	return out
}

// bounds are the elastic policy's bounds of a job; an error for a job
// without one, which this plugin does not scale.
func bounds(job *Job) (lo, hi int32, err error) {
	ep := job.Spec.ElasticPolicy
	if ep == nil {
		return 0, 0, fmt.Errorf("mpijob %q has no elasticPolicy: scale it with kubectl scale", job.Name)
	}
	cur := workerReplicas(job)
	return deref(ep.MinReplicas, 1), deref(ep.MaxReplicas, cur), nil
}

// VictimCost is the pod-deletion-cost that puts the victims ahead of every
// other worker in the operator's choice for scale-in: below the lowest
// cost of the others and below the default 0.
func VictimCost(others []*corev1.Pod) (int32, error) {
	lowest := int64(0)
	for _, p := range others {
		if v, ok := p.Annotations[elastic.AnnotationDeletionCost]; ok {
			if c, err := strconv.ParseInt(v, 10, 32); err == nil {
				lowest = min(lowest, c)
			}
		}
	}
	if lowest <= math.MinInt32 {
		return 0, fmt.Errorf("another worker already has the lowest pod-deletion-cost (%d)", lowest)
	}
	return int32(lowest - 1), nil
}

// setDeletionCost annotates a pod with a pod-deletion-cost.
func setDeletionCost(ctx context.Context, c *Clients, pod string, cost int32) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, elastic.AnnotationDeletionCost, strconv.Itoa(int(cost)))
	_, err := c.Kube.CoreV1().Pods(c.Namespace).Patch(ctx, pod, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{})
	return err
}

// setReplicas moves the job's workers from one count to another through
// the scale subresource, as kubectl scale --current-replicas does: it
// refuses when the count is no longer from. The update carries the Scale's
// resourceVersion, which the operator's status writes also move; a
// conflict reads the Scale again, so only a change of the count itself
// refuses the scale.
func setReplicas(ctx context.Context, c *Clients, name string, from, to int32) error {
	jobs := c.jobs(c.Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sc, err := jobs.Get(ctx, name, metav1.GetOptions{}, "scale")
		if err != nil {
			return err
		}
		cur, _, err := unstructured.NestedInt64(sc.Object, "spec", "replicas")
		if err != nil {
			return fmt.Errorf("reading the scale of mpijob %q: %w", name, err)
		}
		if cur != int64(from) {
			return fmt.Errorf("mpijob %q has %d workers now, not %d: it was scaled meanwhile", name, cur, from)
		}
		if err := unstructured.SetNestedField(sc.Object, int64(to), "spec", "replicas"); err != nil {
			return err
		}
		_, err = jobs.Update(ctx, sc, metav1.UpdateOptions{}, "scale")
		return err
	})
}

// joinNames lists names for a message.
func joinNames(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
