package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubeflow/mpi-operator/test/harness"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The tests of this file replace the CRD: each starts from none and ends
// with the v2 CRD installed, as the other tests expect.

// deleteCRD removes the CRD, and with it every MPIJob.
func deleteCRD(t *testing.T) {
	t.Helper()
	if out, err := kubectl("delete", "crd", crdName, "--ignore-not-found", "--wait", "--timeout=2m"); err != nil {
		t.Fatalf("deleting the CRD: %v\n%s", err, out)
	}
}

// restoreCRD applies the v2 CRD again at the end of the test, whatever
// the test left.
func restoreCRD(t *testing.T) {
	t.Cleanup(func() {
		if err := applyCRD(v2CRD()); err != nil {
			t.Errorf("applying the v2 CRD again: %v", err)
		}
	})
}

func v2CRD() string { return filepath.Join(suite.module, "manifests", "base", "crd.yaml") }

// legacyCRD is an MPIJob CRD shaped as older installs left it: every
// version served, with the status subresource and a schema that keeps
// any field, and storage the version stored.
func legacyCRD(stored string, versions ...string) string {
	var b strings.Builder
	b.WriteString(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: mpijobs.kubeflow.org
spec:
  group: kubeflow.org
  scope: Namespaced
  names:
    kind: MPIJob
    plural: mpijobs
    singular: mpijob
    shortNames: [mj, mpij]
  versions:
`)
	for _, v := range versions {
		fmt.Fprintf(&b, `    - name: %s
      served: true
      storage: %t
      subresources:
        status: {}
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
`, v, v == stored)
	}
	return b.String()
}

// legacyJob is an MPIJob of the given version, in the v1 operator's shape
// (which v1alpha2 and upstream's v1 share for these fields).
func legacyJob(version, ns, name string) string {
	return fmt.Sprintf(`apiVersion: kubeflow.org/%s
kind: MPIJob
metadata:
  name: %s
  namespace: %s
spec:
  slotsPerWorker: 1
  cleanPodPolicy: Running
  mainContainer: worker
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - name: launcher
            image: mpioperator/mpi-pi:openmpi
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: worker
            image: mpioperator/mpi-pi:openmpi
`, version, name, ns)
}

// crdVersion is one of spec.versions of a CRD.
type crdVersion struct {
	Name       string `json:"name"`
	Served     bool   `json:"served"`
	Storage    bool   `json:"storage"`
	Deprecated bool   `json:"deprecated"`
}

// crdState is what the API server holds of the CRD's versions.
type crdState struct {
	Spec struct {
		Versions []crdVersion `json:"versions"`
	} `json:"spec"`
	Status struct {
		StoredVersions []string `json:"storedVersions"`
	} `json:"status"`
}

func getCRD(t *testing.T) crdState {
	t.Helper()
	out, err := kubectl("get", "crd", crdName, "-o", "json")
	if err != nil {
		t.Fatalf("reading the CRD: %v\n%s", err, out)
	}
	var crd crdState
	if err := json.Unmarshal([]byte(out), &crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// createThrough creates a legacy job through the given version, retrying
// while the API server has not yet picked up a CRD just written.
func createThrough(t *testing.T, version, ns, name string) {
	t.Helper()
	var out string
	err := poll.Until(context.Background(), 30*time.Second, func() (bool, error) {
		var err error
		out, err = kubectlStdin(legacyJob(version, ns, name), "create", "-f", "-")
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("creating %s through %s: %v\n%s", name, version, err, out)
	}
}

// checkUpgraded checks the CRD once the v2 CRD is applied over an older
// one: v2beta1 stores and is the only version served, every version that
// storedVersions names is still listed, and every job stays readable
// through v2beta1.
func checkUpgraded(t *testing.T, ns string, storedBefore []string, jobs []string) {
	t.Helper()
	crd := getCRD(t)
	listed := map[string]bool{}
	for _, v := range crd.Spec.Versions {
		listed[v.Name] = true
		if own := v.Name == "v2beta1"; v.Storage != own || v.Served != own || v.Deprecated {
			t.Errorf("version %s: storage %t, served %t, deprecated %t", v.Name, v.Storage, v.Served, v.Deprecated)
		}
	}
	for _, v := range []string{"v2beta1", "v1", "v1alpha2"} {
		if !listed[v] {
			t.Errorf("%s is not listed: %+v", v, crd.Spec.Versions)
		}
	}
	for _, v := range storedBefore {
		if !slices.Contains(crd.Status.StoredVersions, v) {
			t.Errorf("storedVersions %v lost %s", crd.Status.StoredVersions, v)
		}
	}

	list, err := suite.mpi.KubeflowV2beta1().MPIJobs(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing through v2beta1: %v", err)
	}
	var names []string
	for _, j := range list.Items {
		names = append(names, j.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, jobs) {
		t.Errorf("v2beta1 lists %v, want %v", names, jobs)
	}
	for _, name := range jobs {
		// A bare "mpijob" reaches v2beta1: no other version is served.
		// (A discovery cache of its own: the versions have just changed.)
		out, warnings, err := kubectlSplit("--cache-dir", t.TempDir(), "get", "-n", ns, "mpijob", name,
			"-o", "jsonpath={.apiVersion} {.spec.mpiReplicaSpecs.Worker.replicas}")
		if err != nil || out != "kubeflow.org/v2beta1 2" {
			t.Errorf("reading %s: %v %q %s", name, err, out, warnings)
		}
	}
}

// TestCRDOverUpstreamKustomizeInstall applies the v2 CRD over the CRD of
// upstream's v0.3.0 kustomize install (v1alpha2, v1 and v2beta1 served,
// v2beta1 stored) on a cluster whose storedVersions also name v1, as one
// that ran the v1 operator before it does.
func TestCRDOverUpstreamKustomizeInstall(t *testing.T) {
	deleteCRD(t)
	restoreCRD(t)
	ns := suite.Namespace(t)
	versions := []string{"v1alpha2", "v1", "v2beta1"}

	// First v1 stores, then v2beta1: storedVersions [v1 v2beta1].
	if out, err := kubectlStdin(legacyCRD("v1", versions...), "apply", "-f", "-"); err != nil {
		t.Fatalf("the v1-storing CRD: %v\n%s", err, out)
	}
	if err := suite.WaitEstablished(context.Background()); err != nil {
		t.Fatal(err)
	}
	createThrough(t, "v1", ns, "stored-as-v1")
	if out, err := kubectlStdin(legacyCRD("v2beta1", versions...), "apply", "-f", "-"); err != nil {
		t.Fatalf("upstream's CRD: %v\n%s", err, out)
	}
	if got := getCRD(t).Status.StoredVersions; !slices.Equal(got, []string{"v1", "v2beta1"}) {
		t.Fatalf("storedVersions %v, want [v1 v2beta1]", got)
	}
	createThrough(t, "v1alpha2", ns, "written-as-v1alpha2")
	createThrough(t, "v2beta1", ns, "written-as-v2beta1")

	if err := applyCRD(v2CRD()); err != nil {
		t.Fatal(err)
	}
	checkUpgraded(t, ns, []string{"v1", "v2beta1"},
		[]string{"stored-as-v1", "written-as-v1alpha2", "written-as-v2beta1"})
}

// TestCRDOverOwnV1Install applies the v2 CRD over this repository's v1
// CRD (manifests/base/crd.yaml), with a v1 job stored.
func TestCRDOverOwnV1Install(t *testing.T) {
	deleteCRD(t)
	restoreCRD(t)
	ns := suite.Namespace(t)
	if err := applyCRD(filepath.Join(suite.Root, "manifests", "base", "crd.yaml")); err != nil {
		t.Fatal(err)
	}
	createThrough(t, "v1", ns, "v1-job")

	if err := applyCRD(v2CRD()); err != nil {
		t.Fatal(err)
	}
	if got := getCRD(t).Status.StoredVersions; !slices.Equal(got, []string{"v1", "v2beta1"}) {
		t.Errorf("storedVersions %v, want [v1 v2beta1]", got)
	}
	checkUpgraded(t, ns, []string{"v1"}, []string{"v1-job"})

	// Nothing of the stored v1 job is lost: going back to the v1 install
	// serves v1 again, with the fields that v2beta1 does not know.
	if err := applyCRD(filepath.Join(suite.Root, "manifests", "base", "crd.yaml")); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, harness.Poller{Every: 200 * time.Millisecond}, 30*time.Second,
		"spec.mainContainer of the v1 job through v1 after going back to the v1 CRD", func() (bool, string) {
			out, _, err := kubectlSplit("get", "-n", ns, "mpijobs.v1.kubeflow.org", "v1-job", "-o", "jsonpath={.spec.mainContainer}")
			return err == nil && out == "worker", fmt.Sprintf("%q %v", out, err)
		})
}

// TestOverlaysOverUpstreamInstalls applies each overlay with kubectl
// apply -k over the upstream install it replaces: v0.8.0's deploy/v2beta1
// (namespace mpi-operator) for standalone, v0.3.0's kustomize install
// (namespace kubeflow) for kubeflow. The Deployment's selector is
// immutable, so the apply fails unless it is the same.
func TestOverlaysOverUpstreamInstalls(t *testing.T) {
	upstream := filepath.Join(suite.Root, "test", "e2e", "testdata", "upstream")
	for _, tc := range []struct {
		overlay, install, namespace string
	}{
		{"standalone", "v0.8.0-deploy-v2beta1.yaml", "mpi-operator"},
		{"kubeflow", "v0.3.0-kustomize-kubeflow.yaml", "kubeflow"},
	} {
		t.Run(tc.overlay, func(t *testing.T) {
			deleteCRD(t)
			restoreCRD(t)
			if out, err := kubectl("create", "namespace", tc.namespace); err != nil && !strings.Contains(out, "AlreadyExists") {
				t.Fatalf("namespace %s: %v\n%s", tc.namespace, err, out)
			}
			if out, err := kubectl("apply", "-f", filepath.Join(upstream, tc.install)); err != nil {
				t.Fatalf("upstream install %s: %v\n%s", tc.install, err, out)
			}
			if err := suite.WaitEstablished(context.Background()); err != nil {
				t.Fatal(err)
			}
			overlay := filepath.Join(suite.module, "manifests", "overlays", tc.overlay)
			if out, err := kubectl("apply", "-k", overlay); err != nil {
				t.Fatalf("kubectl apply -k %s over %s: %v\n%s", tc.overlay, tc.install, err, out)
			}
			out, err := kubectl("get", "deployment", "mpi-operator", "-n", tc.namespace, "-o",
				`jsonpath={.spec.template.spec.containers[0].command} {.spec.template.spec.containers[0].args}`)
			if err != nil || !strings.Contains(out, `["/mpi-operator-v2"]`) || strings.Contains(out, "alsologtostderr") {
				t.Errorf("the Deployment after the apply runs %q (%v), want the v2 binary and its arguments", out, err)
			}
			if err := suite.WaitEstablished(context.Background()); err != nil {
				t.Fatal(err)
			}
			stores := func(v crdVersion) bool { return v.Name == "v2beta1" && v.Storage }
			if v := getCRD(t); !slices.ContainsFunc(v.Spec.Versions, stores) {
				t.Errorf("v2beta1 is not the storage version after the apply: %+v", v.Spec.Versions)
			}
		})
	}
}
