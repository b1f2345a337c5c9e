package plugin

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
)

// Job is an MPIJob of either version as the plugin reads it: the fields
// that kubeflow.org/v1 and v2beta1 spell alike, decoded from the object as
// the server returned it, which the printers print.
type Job struct {
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              JobSpec   `json:"spec,omitempty"`
	Status            JobStatus `json:"status,omitempty"`
	// Object is the job as served.
	Object *unstructured.Unstructured `json:"-"`
}

// JobSpec is what the plugin reads of a job's spec.
type JobSpec struct {
	ElasticPolicy   *ElasticBounds          `json:"elasticPolicy,omitempty"`
	MPIReplicaSpecs map[string]ReplicaCount `json:"mpiReplicaSpecs,omitempty"`
	// MainContainer is the workers' main container (v1 only).
	MainContainer string `json:"mainContainer,omitempty"`
}

// ElasticBounds are the bounds of a job's elastic policy.
type ElasticBounds struct {
	MinReplicas *int32 `json:"minReplicas,omitempty"`
	MaxReplicas *int32 `json:"maxReplicas,omitempty"`
}

// ReplicaCount is a replica spec's count.
type ReplicaCount struct {
	Replicas *int32 `json:"replicas,omitempty"`
}

// JobStatus is what the plugin reads of a job's status.
type JobStatus struct {
	Conditions     []JobCondition `json:"conditions,omitempty"`
	StartTime      *metav1.Time   `json:"startTime,omitempty"`
	CompletionTime *metav1.Time   `json:"completionTime,omitempty"`
}

// JobCondition is one of a job's conditions.
type JobCondition struct {
	Type   string                 `json:"type"`
	Status corev1.ConditionStatus `json:"status"`
}

// JobFrom decodes a job as served; the fields the plugin does not read are
// left to Object.
func JobFrom(u *unstructured.Unstructured) (*Job, error) {
	job := &Job{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, job); err != nil {
		return nil, fmt.Errorf("reading mpijob %q: %w", u.GetName(), err)
	}
	job.Object = u
	return job, nil
}

// jobs is the chosen version's mpijobs resource in a namespace.
func (c *Clients) jobs(ns string) dynamic.ResourceInterface {
	return c.Dynamic.Resource(c.API.GVR()).Namespace(ns)
}

// getJob reads a job, with a message that says which when it is missing.
func getJob(ctx context.Context, c *Clients, name string) (*Job, error) {
	u, err := c.jobs(c.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, notFound(c, name)
	}
	if err != nil {
		return nil, err
	}
	return JobFrom(u)
}

func notFound(c *Clients, name string) error {
	return fmt.Errorf("mpijob %q not found in namespace %q", name, c.Namespace)
}

// listJobs reads the jobs of a namespace (all of them for
// metav1.NamespaceAll), as served and decoded.
func listJobs(ctx context.Context, c *Clients, ns string) (*unstructured.UnstructuredList, []*Job, error) {
	list, err := c.jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	jobs := make([]*Job, 0, len(list.Items))
	for i := range list.Items {
		job, err := JobFrom(&list.Items[i])
		if err != nil {
			return nil, nil, err
		}
		jobs = append(jobs, job)
	}
	return list, jobs, nil
}
