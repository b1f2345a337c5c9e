// Package v2beta1 holds the kubeflow.org/v2beta1 MPIJob API: the types,
// their registration in a scheme and their defaults. The JSON form is that
// of the upstream operator's v2beta1 API, so that its jobs, Kueue and the
// Kubeflow tools read and write them unchanged; spec.elasticPolicy is this
// operator's optional extension.
//
// +k8s:deepcopy-gen=package
// +k8s:defaulter-gen=TypeMeta
// +groupName=kubeflow.org
package v2beta1
