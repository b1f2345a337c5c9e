package v2beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The API group, version, kind and resource of MPIJob.
const (
	GroupName    = "kubeflow.org"
	GroupVersion = "v2beta1"
	Kind         = "MPIJob"
	Plural       = "mpijobs"
)

// SchemeGroupVersion is the group and version this package registers.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: GroupVersion}

// SchemeGroupVersionKind is the GroupVersionKind of MPIJob.
var SchemeGroupVersionKind = SchemeGroupVersion.WithKind(Kind)

var (
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes, RegisterDefaults)
	// AddToScheme registers the MPIJob types and their defaulters.
	AddToScheme = schemeBuilder.AddToScheme
)

// Resource qualifies a resource of this package's group.
func Resource(resource string) schema.GroupResource {
	return schema.GroupResource{Group: GroupName, Resource: resource}
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &MPIJob{}, &MPIJobList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
