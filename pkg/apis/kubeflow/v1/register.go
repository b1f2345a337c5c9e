package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	// GroupName is the API group of MPIJob.
	GroupName = "kubeflow.org"
	// GroupVersion is the served and stored version.
	GroupVersion = "v1"
	// Kind is the kind of an MPIJob object.
	Kind = "MPIJob"
	// Plural is the resource name of MPIJobs.
	Plural = "mpijobs"
)

// SchemeGroupVersion is the group and version this package registers.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: GroupVersion}

// SchemeGroupVersionKind is the GroupVersionKind of MPIJob.
var SchemeGroupVersionKind = SchemeGroupVersion.WithKind(Kind)

var (
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes, addDefaultingFuncs)
	// AddToScheme registers the MPIJob types and their defaulters.
	AddToScheme = schemeBuilder.AddToScheme
)

// Resource takes an unqualified resource and returns it qualified by group.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &MPIJob{}, &MPIJobList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}

func addDefaultingFuncs(scheme *runtime.Scheme) error {
	return RegisterDefaults(scheme)
}
