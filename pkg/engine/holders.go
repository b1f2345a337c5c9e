package engine

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
)

// Holders finds the pod that holds a worker's name. A worker's name is its
// host name, and the launcher's Role names it before it exists: a pod of
// someone else's under that name (a bare pod, a StatefulSet's, another
// operator's) would be exec'd into, or receive the job's ranks over SSH.
// So the planner skips such names: an elastic job takes its next unused
// index instead, and a fixed job, whose workers have fixed names, is
// Blocked until the name is free. Between them an operator's two pod caches
// see every pod of a namespace: Pods, the pods it labels, and Others, the
// metadata of every other pod.
type Holders struct {
	Pods   corelisters.PodLister
	Others cache.GenericLister
}

// Of is the planner's elastic.Holder for the workers of owner, whose worker
// of index i is called name(i): the name is free when no pod holds it or
// when owner controls the pod that does.
func (h Holders) Of(owner metav1.Object, name func(int) string) func(int) elastic.Holder {
	return func(i int) elastic.Holder {
		holder := h.pod(owner.GetNamespace(), name(i))
		switch {
		case holder == nil || metav1.IsControlledBy(holder, owner):
			return elastic.NameFree
		case holder.GetDeletionTimestamp() != nil:
			return elastic.NameLeaving
		default:
			return elastic.NameHeld
		}
	}
}

// pod is the metadata of the pod called name in namespace, from whichever
// cache holds it; nil when neither does.
func (h Holders) pod(namespace, name string) metav1.Object {
	if pod, err := h.Pods.Pods(namespace).Get(name); err == nil {
		return pod
	}
	obj, err := h.Others.ByNamespace(namespace).Get(name)
	if err != nil {
		return nil
	}
	m, _ := obj.(metav1.Object)
	return m
}
