// Package v1 holds the kubeflow.org/v1 MPIJob API: the types, their
// registration in a scheme and their defaults.
//
// +k8s:deepcopy-gen=package
// +k8s:defaulter-gen=TypeMeta
// +groupName=kubeflow.org
package v1
