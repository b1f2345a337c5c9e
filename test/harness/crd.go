package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// ServeLoosely serves one version of an installed CRD with a schema that
// keeps anything, as a JSON patch of its spec.versions, the way earlier
// MPIJob CRDs served their old versions; kubectl runs kubectl against the
// cluster and returns its combined output. The tests use it to recreate
// what those CRDs let clients store.
func ServeLoosely(kubectl func(args ...string) (string, error), crd, version string) error {
	out, err := kubectl("get", "crd", crd, "-o", "jsonpath={.spec.versions[*].name}")
	if err != nil {
		return fmt.Errorf("reading CRD %s: %w\n%s", crd, err, out)
	}
	i := slices.Index(strings.Fields(out), version)
	if i < 0 {
		return fmt.Errorf("CRD %s lists no version %s: %s", crd, version, out)
	}
	patch := fmt.Sprintf(`[{"op":"replace","path":"/spec/versions/%[1]d/served","value":true},`+
		`{"op":"replace","path":"/spec/versions/%[1]d/schema/openAPIV3Schema",`+
		`"value":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}]`, i)
	if out, err := kubectl("patch", "crd", crd, "--type=json", "-p", patch); err != nil {
		return fmt.Errorf("patching CRD %s: %w\n%s", crd, err, out)
	}
	return nil
}

// PatchWhenServed merge-patches the named object through r as soon as the
// API server serves r's version (a CRD version just served answers
// NotFound for a moment), waiting at most a minute.
func PatchWhenServed(ctx context.Context, r dynamic.ResourceInterface, name string, patch []byte) error {
	return Poller{Every: 20 * time.Millisecond}.Until(ctx, time.Minute, func() (bool, error) {
		_, err := r.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// RefuseUpdates makes the API server refuse the updates of rule's objects
// in namespace ns for which the CEL expression is false, with message,
// through a ValidatingAdmissionPolicy and its binding, both named name.
// remove deletes them again; the API server may take a moment to apply
// either change.
func RefuseUpdates(ctx context.Context, kube kubernetes.Interface, name, ns string, rule admissionv1.Rule,
	expression, message string) (remove func() error, err error) {
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Update},
					Rule:       rule,
				},
			}}},
			Validations: []admissionv1.Validation{{Expression: expression, Message: message}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns},
			}},
		},
	}
	admission := kube.AdmissionregistrationV1()
	if _, err := admission.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating the policy: %w", err)
	}
	if _, err := admission.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating the policy binding: %w", err)
	}
	var once sync.Once
	var removeErr error
	return func() error {
		once.Do(func() {
			err := admission.ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				removeErr = fmt.Errorf("deleting the policy binding: %w", err)
			}
			err = admission.ValidatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				removeErr = fmt.Errorf("deleting the policy: %w", err)
			}
		})
		return removeErr
	}, nil
}

// ApplyCRDs applies CRD files or directories, server-side (with
// --force-conflicts) unless clientSide asks for a user's plain kubectl
// apply, which fails once a CRD outgrows the last-applied annotation, then
// waits until every CRD is Established.
func (c *Cluster) ApplyCRDs(ctx context.Context, clientSide bool, paths ...string) error {
	for _, p := range paths {
		args := []string{"apply", "--server-side", "--force-conflicts", "-f", p}
		if clientSide {
			args = []string{"apply", "-f", p}
		}
		if err := c.KubectlRun(ctx, args...); err != nil {
			return err
		}
	}
	return c.WaitEstablished(ctx)
}

// WaitEstablished waits, at most a minute, until every CRD of the cluster
// is Established: kubectl wait would fail outright while a new CRD has no
// status yet.
func (c *Cluster) WaitEstablished(ctx context.Context) error {
	var pending string
	err := Poller{}.Until(ctx, time.Minute, func() (bool, error) {
		out, err := c.KubectlCmd(ctx, "get", "crd", "-o",
			`jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Established")].status}{"\n"}{end}`).Output()
		if err != nil {
			return false, nil
		}
		pending = ""
		for _, line := range strings.Fields(string(out)) {
			if !strings.HasSuffix(line, "=True") {
				pending += " " + line
			}
		}
		return pending == "", nil
	})
	if err != nil {
		return fmt.Errorf("CRDs not Established:%s: %w", pending, err)
	}
	return nil
}

// WaitCollectable waits, at most two minutes, until kube-controller-manager's
// garbage collector resolves the MPIJobs of api, which it learns of only at
// its discovery resync (every 30 s) after the CRD is installed. Until then
// it backs off on every child of a deleted job, so that, say, a launcher
// Job and its pods (which carry the Job controller's finalizer) outlive
// their MPIJob, and a namespace being deleted stays Terminating.
//
// The probe is a ConfigMap in OperatorNamespace owned by an MPIJob that
// does not exist, which the collector deletes once it can look the owner
// up. A probe the collector has failed on waits behind its back-off, so
// each try makes a new one.
func (c *Cluster) WaitCollectable(ctx context.Context, api API) error {
	cms := c.Kube.CoreV1().ConfigMaps(OperatorNamespace)
	start := time.Now()
	for try := 0; ; try++ {
		probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("gc-probe-%d", try),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubeflow.org/" + api.Version, Kind: "MPIJob",
				Name: "gc-probe", UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", try))}},
		}}
		if _, err := cms.Create(ctx, probe, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating the garbage collector's probe: %w", err)
		}
		err := Poller{Every: 200 * time.Millisecond}.Until(ctx, 5*time.Second, func() (bool, error) {
			_, err := cms.Get(ctx, probe.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err == nil {
			c.logf("the garbage collector resolves %s MPIJobs (%s)", api.Version, time.Since(start).Round(time.Second))
			return nil
		}
		if !errors.Is(err, ErrTimeout) {
			return err
		}
		if err := cms.Delete(ctx, probe.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if time.Since(start) > 2*time.Minute {
			return fmt.Errorf("the garbage collector does not resolve %s MPIJobs after %s", api.Version, time.Since(start).Round(time.Second))
		}
	}
}
