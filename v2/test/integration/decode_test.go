package integration

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/kubeflow/mpi-operator/pkg/metrics"
	"github.com/kubeflow/mpi-operator/pkg/tolerant"
	"github.com/kubeflow/mpi-operator/test/harness"
	kubeflow "github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// The versions the CRD lists unserved, and the one it serves.
var (
	legacyMPIJobs = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "mpijobs"}
	servedMPIJobs = kubeflow.SchemeGroupVersion.WithResource("mpijobs")
)

// TestUndecodableJobsAreSkipped stores MPIJobs that the v2beta1 operator
// cannot decode the way a tenant could were v1 served with the schema that
// keeps anything, as upstream's v0.3.0 kustomize install served it: a spec
// field of the wrong type, and status.startTime set to a number. This
// release's CRD refuses both. The controller, started after them and
// restarted, reconciles the other jobs of the namespace and leaves a
// Warning event on each poisoned one; a job poisoned while it runs drops
// out of the cache the same way, and is taken up again once it is fixed.
// Not parallel: it changes the CRD, which the parallel tests read.
func TestUndecodableJobsAreSkipped(t *testing.T) {
	ctx := context.Background()
	ns := jobNamespace(t)
	dyn, err := dynamic.NewForConfig(suite.Config)
	if err != nil {
		t.Fatal(err)
	}
	legacy := dyn.Resource(legacyMPIJobs)
	crd := suite.module + "/manifests/base/crd.yaml"

	serveLegacyVersion(t)
	t.Cleanup(func() {
		if err := applyCRD(crd); err != nil {
			t.Errorf("reinstalling the CRD: %v", err)
		}
	})
	createThrough(t, "v1", ns, "poisoned")
	patchSlots(t, legacy, ns, "poisoned", `"many"`)
	createThrough(t, "v1", ns, "stamped")
	if _, err := legacy.Namespace(ns).Patch(ctx, "stamped", types.MergePatchType,
		[]byte(`{"status":{"startTime":42}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("patching status.startTime through v1: %v", err)
	}
	if err := applyCRD(crd); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, poll, waitTimeout, "v1 not served", func() (bool, error) {
		_, err := legacy.Namespace(ns).List(ctx, metav1.ListOptions{})
		return apierrors.IsNotFound(err), nil
	})
	refused, err := runtime.DefaultUnstructuredConverter.ToUnstructured(validJob(ns, "refused", 1))
	if err != nil {
		t.Fatal(err)
	}
	refused["spec"].(map[string]any)["slotsPerWorker"] = "many"
	_, err = dyn.Resource(servedMPIJobs).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: refused}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.slotsPerWorker") {
		t.Errorf("creating a job with slotsPerWorker \"many\" through v2beta1: %v, want Invalid naming spec.slotsPerWorker", err)
	}

	before := testutil.ToFloat64(metrics.UndecodableObjects.WithLabelValues("mpijobs"))
	running := startController(t, ns, nil)
	createJob(t, elasticJob(ns, "fine", 1, 1, 3, 0))
	harness.Eventually(t, poll, waitTimeout, "fine-worker-0 listed", func() (bool, error) {
		return slices.Equal(listedWorkers(t, ns, "fine"), []string{"fine-worker-0"}), nil
	})
	waitForEvent(t, ns, "poisoned", "Warning", tolerant.ReasonUndecodable, "slotsPerWorker")
	waitForEvent(t, ns, "stamped", "Warning", tolerant.ReasonUndecodable, "startTime")
	if got := testutil.ToFloat64(metrics.UndecodableObjects.WithLabelValues("mpijobs")) - before; got < 2 {
		t.Errorf("mpi_operator_undecodable_objects_total grew by %v, want at least 2", got)
	}

	// A restart lists them again, and goes on with the others.
	running.stop()
	startController(t, ns, nil)
	scaleJob(t, ns, "fine", 2)
	harness.Eventually(t, poll, waitTimeout, "fine-worker-1 listed", func() (bool, error) {
		return slices.Equal(listedWorkers(t, ns, "fine"), []string{"fine-worker-0", "fine-worker-1"}), nil
	})

	// A job poisoned while the controller watches it leaves the cache; the
	// others go on; fixed, it is taken up again.
	createJob(t, elasticJob(ns, "late", 1, 1, 3, 0))
	harness.Eventually(t, poll, waitTimeout, "late-worker-0 listed", func() (bool, error) {
		return slices.Equal(listedWorkers(t, ns, "late"), []string{"late-worker-0"}), nil
	})
	serveLegacyVersion(t)
	patchSlots(t, legacy, ns, "late", `"many"`)
	waitForEvent(t, ns, "late", "Warning", tolerant.ReasonUndecodable, "slotsPerWorker")
	scaleJob(t, ns, "fine", 3)
	harness.Eventually(t, poll, waitTimeout, "fine-worker-2 listed", func() (bool, error) {
		return slices.Equal(listedWorkers(t, ns, "fine"), []string{"fine-worker-0", "fine-worker-1", "fine-worker-2"}), nil
	})
	patchSlots(t, dyn.Resource(servedMPIJobs), ns, "late", `1`)
	scaleJob(t, ns, "late", 2)
	harness.Eventually(t, poll, waitTimeout, "late-worker-1 listed", func() (bool, error) {
		return slices.Equal(listedWorkers(t, ns, "late"), []string{"late-worker-0", "late-worker-1"}), nil
	})
}

// serveLegacyVersion serves v1 with a schema that keeps anything.
func serveLegacyVersion(t *testing.T) {
	t.Helper()
	if err := harness.ServeLoosely(kubectl, crdName, legacyMPIJobs.Version); err != nil {
		t.Fatal(err)
	}
}

// patchSlots sets spec.slotsPerWorker to the JSON value through the
// resource's version, once the API server serves it.
func patchSlots(t *testing.T, r dynamic.NamespaceableResourceInterface, ns, name, value string) {
	t.Helper()
	patch := []byte(`{"spec":{"slotsPerWorker":` + value + `}}`)
	if err := harness.PatchWhenServed(context.Background(), r.Namespace(ns), name, patch); err != nil {
		t.Fatalf("patching slotsPerWorker of %s: %v", name, err)
	}
}
