package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/controller"
	"github.com/kubeflow/mpi-operator/pkg/metrics"
	"github.com/kubeflow/mpi-operator/pkg/tolerant"
	"github.com/kubeflow/mpi-operator/test/harness"
)

// legacyMPIJobs is a version that earlier releases of the CRD served with
// a schema that keeps anything, and that this one serves read-only.
var legacyMPIJobs = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v2beta1", Resource: "mpijobs"}

// TestUndecodableJobsAreSkipped stores MPIJobs that the operator cannot
// decode the way a tenant could under the CRD of an earlier release, which
// served v2beta1 with a schema that keeps anything: a spec field of the
// wrong type, and status.startTime set to a number. The CRD of this release
// refuses both, through v1 and through the read-only v2beta1. The
// controller, started after them (an upgrade, a new leader) and restarted,
// reconciles the jobs of the other namespaces and leaves a Warning event on
// each poisoned one; a job poisoned while it runs drops out of the cache
// the same way, and is taken up again once it is fixed.
func TestUndecodableJobsAreSkipped(t *testing.T) {
	ctx := context.Background()
	tenant, other := env.Namespace(t), env.Namespace(t)
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	legacy := dyn.Resource(legacyMPIJobs)

	serveLegacyVersion(t, legacy, tenant)
	t.Cleanup(func() {
		if err := installCRD(); err != nil {
			t.Errorf("reinstalling the CRD: %v", err)
		}
	})
	poisoned := legacyJob(tenant, "poisoned")
	poisoned.Object["spec"].(map[string]any)["slotsPerWorker"] = "many"
	createThroughLegacy(t, legacy, poisoned)
	createThroughLegacy(t, legacy, legacyJob(tenant, "stamped"))
	if _, err := legacy.Namespace(tenant).Patch(ctx, "stamped", types.MergePatchType,
		[]byte(`{"status":{"startTime":42}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("patching status.startTime through v2beta1: %v", err)
	}
	if err := installCRD(); err != nil {
		t.Fatal(err)
	}
	checkPoisonRefused(t, dyn, tenant)

	before := testutil.ToFloat64(metrics.UndecodableObjects.WithLabelValues("mpijobs"))
	stop := startController(t, controller.Config{})
	job := newJob(other, "fine", 1)
	job.Spec.ElasticPolicy = &kubeflow.ElasticPolicy{MinReplicas: ptr[int32](1), MaxReplicas: ptr[int32](3)}
	createJob(t, job)
	waitForRunning(t, other, "fine-worker-0")
	waitForHosts(t, other, "fine", hostsOf("fine", 0)...)
	for _, name := range []string{"poisoned", "stamped"} {
		waitForEvents(t, tenant, name, "Warning/"+tolerant.ReasonUndecodable)
	}
	checkEventNames(t, tenant, "poisoned", "slotsPerWorker")
	checkEventNames(t, tenant, "stamped", "startTime")
	if got := testutil.ToFloat64(metrics.UndecodableObjects.WithLabelValues("mpijobs")) - before; got < 2 {
		t.Errorf("mpi_operator_undecodable_objects_total grew by %v, want at least 2", got)
	}

	// A restart lists them again, and goes on with the others.
	stop()
	startController(t, controller.Config{})
	scaleWorkers(t, other, "fine", 2)
	waitForRunning(t, other, "fine-worker-1")
	waitForHosts(t, other, "fine", hostsOf("fine", 0, 1)...)

	// A job poisoned while the controller watches it leaves the cache; the
	// others go on; fixed through v1 (which takes the field over from the
	// v2beta1 write, so that no write through v2beta1 is left on record),
	// it is taken up again.
	running := newJob(tenant, "running", 1)
	running.Spec.ElasticPolicy = &kubeflow.ElasticPolicy{MinReplicas: ptr[int32](1), MaxReplicas: ptr[int32](3)}
	createJob(t, running)
	waitForHosts(t, tenant, "running", hostsOf("running", 0)...)
	serveLegacyVersion(t, legacy, tenant)
	patchSlots(t, legacy, tenant, "running", `"many"`)
	waitForEvents(t, tenant, "running", "Warning/"+tolerant.ReasonUndecodable)
	scaleWorkers(t, other, "fine", 3)
	waitForHosts(t, other, "fine", hostsOf("fine", 0, 1, 2)...)
	patchSlots(t, dyn.Resource(kubeflow.SchemeGroupVersion.WithResource("mpijobs")), tenant, "running", `1`)
	scaleWorkers(t, tenant, "running", 2)
	waitForHosts(t, tenant, "running", hostsOf("running", 0, 1)...)
}

// legacyJob is an MPIJob as a v2beta1 client would create it; its fields
// are also v1's.
func legacyJob(ns, name string) *unstructured.Unstructured {
	template := func(container string) map[string]any {
		return map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": container, "image": "mpioperator/mpi-pi:latest"},
		}}}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeflow.org/v2beta1",
		"kind":       "MPIJob",
		"metadata":   map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{
			"mpiReplicaSpecs": map[string]any{
				"Launcher": map[string]any{"replicas": int64(1), "template": template("launcher")},
				"Worker":   map[string]any{"replicas": int64(1), "template": template("worker")},
			},
		},
	}}
}

// createThroughLegacy creates job through v2beta1 once the API server
// serves it.
func createThroughLegacy(t *testing.T, legacy dynamic.NamespaceableResourceInterface, job *unstructured.Unstructured) {
	t.Helper()
	harness.Eventually(t, poll, waitTimeout, "a create through v2beta1", func() (bool, error) {
		_, err := legacy.Namespace(job.GetNamespace()).Create(context.Background(), job, metav1.CreateOptions{})
		return err == nil, ignoreNotFound(err)
	})
}

// serveLegacyVersion serves v2beta1 with a schema that keeps anything, and
// waits until the API server takes a create through it.
func serveLegacyVersion(t *testing.T, legacy dynamic.NamespaceableResourceInterface, ns string) {
	t.Helper()
	if err := harness.ServeLoosely(kubectl, "mpijobs.kubeflow.org", legacyMPIJobs.Version); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, poll, waitTimeout, "v2beta1 served with a schema that keeps anything", func() (bool, error) {
		_, err := legacy.Namespace(ns).Create(context.Background(), legacyJob(ns, "probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil, nil
	})
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

// checkPoisonRefused checks that the CRD of this release refuses the poisoned
// values through v1, naming the field, and any spec or status through the
// versions it serves read-only, once the API server has the CRD applied.
func checkPoisonRefused(t *testing.T, dyn dynamic.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	job := legacyJob(ns, "refused")
	job.SetAPIVersion("kubeflow.org/v1")
	job.Object["spec"].(map[string]any)["slotsPerWorker"] = "many"
	_, err := dyn.Resource(kubeflow.SchemeGroupVersion.WithResource("mpijobs")).Namespace(ns).Create(ctx, job, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.slotsPerWorker") {
		t.Errorf("creating a job with slotsPerWorker \"many\" through v1: %v, want Invalid naming spec.slotsPerWorker", err)
	}
	for _, version := range []string{"v1alpha2", "v2beta1"} {
		gvr := schema.GroupVersionResource{Group: "kubeflow.org", Version: version, Resource: "mpijobs"}
		job := legacyJob(ns, "refused-"+version)
		job.SetAPIVersion(gvr.GroupVersion().String())
		harness.Eventually(t, poll, waitTimeout, "a create through "+version+" refused as read-only", func() (bool, error) {
			_, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, job, metav1.CreateOptions{})
			return apierrors.IsInvalid(err) && strings.Contains(err.Error(), "read-only"), nil
		})
		_, err := dyn.Resource(gvr).Namespace(ns).Patch(ctx, "stamped", types.MergePatchType,
			[]byte(`{"status":{"startTime":43}}`), metav1.PatchOptions{}, "status")
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "read-only") {
			t.Errorf("patching the status through %s: %v, want Invalid as read-only", version, err)
		}
		// What the garbage collector writes, metadata alone, goes through.
		if _, err := dyn.Resource(gvr).Namespace(ns).Patch(ctx, "stamped", types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"seen-through":"`+version+`"}}}`), metav1.PatchOptions{}); err != nil {
			t.Errorf("a metadata-only patch through %s: %v", version, err)
		}
	}
}

// checkEventNames checks that the Undecodable event of the named job names
// field.
func checkEventNames(t *testing.T, ns, name, field string) {
	t.Helper()
	events, err := env.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=MPIJob,involvedObject.name=" + name + ",reason=" + tolerant.ReasonUndecodable,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if !strings.Contains(e.Message, field) {
			t.Errorf("event of %s/%s: %q does not name %s", ns, name, e.Message, field)
		}
	}
	if len(events.Items) == 0 {
		t.Errorf("no %s event of %s/%s", tolerant.ReasonUndecodable, ns, name)
	}
}
