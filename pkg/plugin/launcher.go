package plugin

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// jobNameLabels are the labels by which the Job controller names a Job on
// its pods: the first since Kubernetes 1.27, the second before and since.
var jobNameLabels = []string{"batch.kubernetes.io/job-name", "job-name"}

// launcherPod returns the pod of a job's launcher. Under v1 it is the pod
// <job>-launcher. Under v2beta1 it is a pod of the batch/v1 Job
// <job>-launcher, named by the Job controller: of the pods that carry the
// Job's name label and that the Job controls, the newest that has not
// finished, or else the newest (a finished launcher's logs still count).
func launcherPod(ctx context.Context, c *Clients, job string) (*corev1.Pod, error) {
	name := LauncherName(job)
	pods := c.Kube.CoreV1().Pods(c.Namespace)
	if !c.API.LauncherJob {
		pod, err := pods.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("mpijob %q has no launcher pod yet", job)
		case err != nil:
			return nil, err
		case pod.Labels[c.API.LabelJobName] != job:
			return nil, fmt.Errorf("pod %s is not mpijob %q's launcher", pod.Name, job)
		}
		return pod, nil
	}
	for _, key := range jobNameLabels {
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: key + "=" + name})
		if err != nil {
			return nil, err
		}
		var mine []*corev1.Pod
		for i := range list.Items {
			ref := metav1.GetControllerOf(&list.Items[i])
			if ref != nil && ref.APIVersion == "batch/v1" && ref.Kind == "Job" && ref.Name == name {
				mine = append(mine, &list.Items[i])
			}
		}
		if len(mine) > 0 {
			return slices.MinFunc(mine, launcherOrder), nil
		}
	}
	return nil, fmt.Errorf("mpijob %q has no launcher pod yet (no pod of Job %s)", job, name)
}

// launcherOrder puts the launcher pods that have not finished nor are
// being deleted first, then the newest, then by name.
func launcherOrder(a, b *corev1.Pod) int {
	if fa, fb := podDone(a), podDone(b); fa != fb {
		if fa {
			return 1
		}
		return -1
	}
	return cmp.Or(b.CreationTimestamp.Compare(a.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
}

func podDone(p *corev1.Pod) bool {
	return p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}
