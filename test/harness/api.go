package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
)

// API is the MPIJob version a harness drives, and what the operator that
// serves it does differently: how it labels the workers, how
// discover_hosts.sh names them, and what must hold before a worker is
// listed (v1: the launcher's Role allows exec into it; v2beta1: its name
// resolves through the job's Service, an EndpointSlice names it).
type API struct {
	Version      string // "v1" or "v2beta1"
	LabelJobName string
	LabelRole    string
	// Manifests is the directory of the CRD and the ClusterRole, relative
	// to the repository.
	Manifests string
	// Binary is the operator that `make build` writes, relative to the
	// repository.
	Binary string
	// FQDNHosts: discover_hosts.sh names a worker <pod>.<service>...;
	// otherwise <pod>:<slots>.
	FQDNHosts bool
	// ReachBySlices: a worker is reachable once the job Service's
	// EndpointSlices name it; otherwise once the launcher's Role allows
	// exec into it.
	ReachBySlices bool
	// LauncherJob: the launcher is the pod of a batch Job, which kwok's
	// stock stages complete at once unless told not to.
	LauncherJob bool
}

// V1 is the kubeflow.org/v1 operator of this module.
var V1 = API{
	Version:      "v1",
	LabelJobName: LabelJobName,
	LabelRole:    LabelRole,
	Manifests:    "manifests/base",
	Binary:       "_output/bin/mpi-operator",
}

// V2beta1 is the kubeflow.org/v2beta1 operator of the v2 module.
var V2beta1 = API{
	Version:       "v2beta1",
	LabelJobName:  "training.kubeflow.org/job-name",
	LabelRole:     "training.kubeflow.org/job-role",
	Manifests:     "v2/manifests/base",
	Binary:        "_output/bin/mpi-operator-v2",
	FQDNHosts:     true,
	ReachBySlices: true,
	LauncherJob:   true,
}

// APIByVersion returns the API of a version, or false.
func APIByVersion(v string) (API, bool) {
	for _, a := range []API{V1, V2beta1} {
		if a.Version == v {
			return a, true
		}
	}
	return API{}, false
}

// BinaryIn is the operator binary a suite tests: the one the environment
// variable env names when it is set, or the one `make build` writes into
// the repository root.
func (a API) BinaryIn(root, env string) (string, error) {
	bin := filepath.Join(root, a.Binary)
	if v := os.Getenv(env); v != "" {
		var err error
		if bin, err = filepath.Abs(v); err != nil {
			return "", err
		}
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("the operator binary is missing (%w): run `make build` first, or set %s", err, env)
	}
	return bin, nil
}

// GVR is the MPIJob resource of the version.
func (a API) GVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: kubeflow.GroupName, Version: a.Version, Resource: "mpijobs"}
}

// HostPod is the pod a host line of discover_hosts.sh names.
func (a API) HostPod(host string) string {
	if a.FQDNHosts {
		host, _, _ = strings.Cut(host, ".")
	}
	return host
}

// IsWorker tells whether the labels are those of a worker pod.
func (a API) IsWorker(labels map[string]string) bool { return labels[a.LabelRole] == "worker" }

// JobObject is job as an object of the version. The fields NewJob sets
// (slotsPerWorker, elasticPolicy, the replica specs) are spelled the same in
// v1 and v2beta1.
func (a API) JobObject(job *kubeflow.MPIJob) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(job)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(kubeflow.GroupName + "/" + a.Version)
	u.SetKind("MPIJob")
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

// CreateJob creates job as an object of the version.
func (a API) CreateJob(ctx context.Context, dyn dynamic.Interface, job *kubeflow.MPIJob) error {
	u, err := a.JobObject(job)
	if err != nil {
		return err
	}
	_, err = dyn.Resource(a.GVR()).Namespace(job.Namespace).Create(ctx, u, metav1.CreateOptions{})
	return err
}

// Scale sets a job's worker replicas through the scale subresource, as
// `kubectl scale` does: a read of the Scale, then an update of it, which
// fails with a conflict when the job changed in between.
func (a API) Scale(ctx context.Context, dyn dynamic.Interface, ns, name string, replicas int) error {
	jobs := dyn.Resource(a.GVR()).Namespace(ns)
	sc, err := jobs.Get(ctx, name, metav1.GetOptions{}, "scale")
	if err != nil {
		return err
	}
	if err := unstructured.SetNestedField(sc.Object, int64(replicas), "spec", "replicas"); err != nil {
		return err
	}
	_, err = jobs.Update(ctx, sc, metav1.UpdateOptions{}, "scale")
	return err
}
