package controller

import (
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow/mpi-operator/pkg/podcache"
)

func TestTransforms(t *testing.T) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "job-ssh", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
		Data: map[string][]byte{"ssh-privatekey": []byte("key")}}
	out, _ := trimChild(secret)
	if s := out.(*corev1.Secret); s.Data != nil || s.ManagedFields != nil {
		t.Errorf("trimmed Secret keeps %v, %v", s.Data, s.ManagedFields)
	}
	ctl := true
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: "p", Namespace: "ns", UID: "u", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"},
		OwnerReferences: []metav1.OwnerReference{{Name: "other"}, {Name: "rs", Controller: &ctl}},
	}}
	// Of the "app"-labelled objects, a job's children keep what the
	// controller reads; a tenant's keep their metadata only.
	jobRef := metav1.OwnerReference{APIVersion: "kubeflow.org/v2beta1", Kind: "MPIJob", Name: "pi", UID: "pi-uid", Controller: &ctl}
	files := map[string]string{"hostfile": "pi-worker-0 slots=1\n"}
	owned := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pi-config", OwnerReferences: []metav1.OwnerReference{jobRef}}, Data: files}
	if out, _ := trimChild(owned.DeepCopy()); !cmp.Equal(out, owned) {
		t.Errorf("a job's ConfigMap was trimmed: %s", cmp.Diff(owned, out))
	}
	tenant := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big", Labels: map[string]string{"app": "web"},
		Annotations: map[string]string{"note": "x"}}, Data: map[string]string{"blob": strings.Repeat("x", 1<<20)}}
	want := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big", Labels: map[string]string{"app": "web"}}}
	if out, _ := trimChild(tenant); !cmp.Equal(out, want) {
		t.Errorf("a tenant's ConfigMap keeps more than its metadata: %s", cmp.Diff(want, out))
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "etl"}, Spec: batchv1.JobSpec{Parallelism: ptr[int32](3)}}
	if out, _ := trimChild(job); !cmp.Equal(out, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "etl"}}) {
		t.Errorf("a tenant's Job keeps its spec: %+v", out)
	}
	// Of an EndpointSlice, the endpoints that give a pod a host name keep
	// the name and the pod's UID; the others go.
	host, other := "pi-worker-0", "web-0"
	svcRef := metav1.OwnerReference{APIVersion: "v1", Kind: "Service", Name: "pi", UID: "svc-uid", Controller: &ctl}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "pi-x", Namespace: "ns", UID: "s", Labels: map[string]string{"app": "pi"},
			Annotations: map[string]string{"a": "b"}, OwnerReferences: []metav1.OwnerReference{svcRef},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.0.0.1"}, Hostname: &host, NodeName: ptr("n1"),
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: host, Namespace: "ns", UID: "w0"}},
			{Addresses: []string{"10.0.0.2"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "pi-worker-1", UID: "w1"}},
			{Addresses: []string{"10.0.0.3"}, Hostname: &other},
		},
		Ports: []discoveryv1.EndpointPort{{Name: ptr("ssh")}},
	}
	wantSlice := &publishedNames{
		ObjectMeta: metav1.ObjectMeta{Name: "pi-x", Namespace: "ns", UID: "s", Labels: map[string]string{"app": "pi"},
			OwnerReferences: []metav1.OwnerReference{svcRef}},
		Pods: []namedPod{{UID: "w0", Host: host}},
	}
	if out, _ := trimChild(slice); !cmp.Equal(out, wantSlice) {
		t.Errorf("trimmed EndpointSlice: %s", cmp.Diff(wantSlice, out))
	}

	trimmed, _ := podcache.TrimMetadata(m)
	got := trimmed.(*metav1.PartialObjectMetadata)
	if got.Labels != nil || got.Annotations != nil || len(got.OwnerReferences) != 1 || got.OwnerReferences[0].Name != "rs" || got.UID != "u" {
		t.Errorf("trimmed pod metadata %+v", got.ObjectMeta)
	}
}

// TestTrimPod: a worker read from the cache has what the controller reads
// of it (its metadata but the replica-index label, phase, reason, Ready
// condition and subdomain) and nothing of its spec's containers or the
// rest of its status.
func TestTrimPod(t *testing.T) {
	job := newTestJob(2)
	w := newWorker(job, 1, gangScheduler{}, "cluster.local")
	w.UID, w.ResourceVersion = "w-uid", "5"
	w.Annotations = map[string]string{"a": "b"}
	w.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	labels := maps.Clone(w.Labels)
	delete(labels, labelReplicaIndex)
	w.Status = corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", PodIP: "10.0.0.1",
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionFalse}}}
	want := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: w.Namespace, UID: "w-uid", ResourceVersion: "5",
			Labels: labels, Annotations: w.Annotations, OwnerReferences: w.OwnerReferences},
		Spec: corev1.PodSpec{Subdomain: w.Spec.Subdomain},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}},
	}
	if diff := cmp.Diff(want, podcache.AsPod(trimPod(w))); diff != "" {
		t.Errorf("worker read from the cache (-want +got):\n%s", diff)
	}
	if w.Spec.Subdomain == "" {
		t.Error("the worker has no subdomain: the test does not show that it is kept")
	}
}
