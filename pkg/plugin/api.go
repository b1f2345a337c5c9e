package plugin

import (
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
)

// API is an MPIJob version the plugin drives, and how the operator that
// serves it names and labels a job's pods.
type API struct {
	Version string // "v1" or "v2beta1"
	// LabelJobName and LabelRole are the pod labels that carry the job's
	// name and the pod's role, "launcher" or "worker".
	LabelJobName, LabelRole string
	// LauncherJob: the launcher is the pod of the batch/v1 Job
	// <job>-launcher, whose name the Job controller generates; otherwise
	// it is the pod <job>-launcher itself.
	LauncherJob bool
	// IndexFromName: a worker's index is its name's suffix only. v2beta1's
	// replica-index label is the index plus one when the launcher runs as
	// a worker; v1's label is the index.
	IndexFromName bool
	// MaxWorkers is the most workers the version's CRD admits.
	MaxWorkers int32
}

// The versions the plugin speaks, in its order of preference. The v2beta1
// types live in the repository's v2 module, which requires this one: the
// plugin reads and writes v2beta1 jobs through the dynamic client instead of
// importing them.
var (
	APIv1 = API{
		Version:      "v1",
		LabelJobName: labelJobName,
		LabelRole:    labelRole,
		MaxWorkers:   kubeflow.MaxWorkers,
	}
	APIv2beta1 = API{
		Version:       "v2beta1",
		LabelJobName:  "training.kubeflow.org/job-name",
		LabelRole:     "training.kubeflow.org/job-role",
		LauncherJob:   true,
		IndexFromName: true,
		// v2/pkg/apis/kubeflow/v2beta1.MaxWorkers.
		MaxWorkers: 1000,
	}
	apis = []API{APIv1, APIv2beta1}
)

// GroupVersion is kubeflow.org/<version>.
func (a API) GroupVersion() schema.GroupVersion {
	return schema.GroupVersion{Group: kubeflow.GroupName, Version: a.Version}
}

// GVR is the version's mpijobs resource.
func (a API) GVR() schema.GroupVersionResource { return a.GroupVersion().WithResource("mpijobs") }

// apiByVersion reads --api-version: v1 or v2beta1, with or without the
// group.
func apiByVersion(v string) (API, error) {
	short := strings.TrimPrefix(v, kubeflow.GroupName+"/")
	for _, a := range apis {
		if a.Version == short {
			return a, nil
		}
	}
	return API{}, fmt.Errorf("invalid --api-version %q: must be v1 or v2beta1 (kubeflow.org/v1 or kubeflow.org/v2beta1)", v)
}

// ServedAPIs lists the versions whose mpijobs the server serves, in the
// plugin's order of preference.
func ServedAPIs(d discovery.DiscoveryInterface) ([]API, error) {
	var served []API
	for _, a := range apis {
		list, err := d.ServerResourcesForGroupVersion(a.GroupVersion().String())
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("discovering %s: %w", a.GroupVersion(), err)
		}
		for _, r := range list.APIResources {
			if r.Name == "mpijobs" {
				served = append(served, a)
				break
			}
		}
	}
	return served, nil
}

// chooseAPI picks the version the commands use: the one asked for, which
// the server must serve, or else v1 when served, or else v2beta1.
func chooseAPI(served []API, asked string) (API, error) {
	var names []string
	for _, a := range served {
		names = append(names, a.GroupVersion().String())
	}
	if asked != "" {
		want, err := apiByVersion(asked)
		if err != nil {
			return API{}, err
		}
		if !slices.Contains(served, want) {
			return API{}, fmt.Errorf("the server does not serve mpijobs in %s (it serves them in: %s)", want.GroupVersion(), joinNames(names))
		}
		return want, nil
	}
	if len(served) == 0 {
		return API{}, fmt.Errorf("the server serves no MPIJobs, neither kubeflow.org/v1 nor kubeflow.org/v2beta1: is an MPI operator's CRD installed?")
	}
	return served[0], nil
}
