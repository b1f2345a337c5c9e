// Package testcluster starts and stops the local control plane of
// hack/cluster-up.sh for test suites and harnesses, each in a directory and
// on ports of its own.
package testcluster

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Cluster is one control plane: its state lives in Dir, and Settings (the
// KEY=value environment of hack/cluster-up.sh: ports, KWOK_NODES, ...) tell
// it apart from the others on the machine.
type Cluster struct {
	Root     string   // the repository
	Dir      string   // LOCAL_DIR of the scripts
	Settings []string // KEY=value

	// Known once Up has returned.
	Kubeconfig string // admin kubeconfig
	Kubectl    string // the pinned kubectl
}

// New describes the cluster kept in <root>/_output/<name>.
func New(root, name string, settings ...string) *Cluster {
	dir := filepath.Join(root, "_output", name)
	return &Cluster{Root: root, Dir: dir, Settings: append(settings, "LOCAL_DIR="+dir)}
}

// RepoRoot finds the repository from the working directory of a test,
// which is its package's directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Up starts the cluster, or finds it up, and reads its kubeconfig and
// kubectl. The first run on a machine builds the binaries.
func (c *Cluster) Up() error { return c.UpContext(context.Background()) }

// UpContext is Up, given up when ctx is done.
func (c *Cluster) UpContext(ctx context.Context) error {
	if err := c.Script(ctx, "hack/cluster-up.sh"); err != nil {
		return fmt.Errorf("starting the control plane (logs in %s): %w", c.Dir, err)
	}
	return c.load()
}

// Down stops every process of the cluster.
func (c *Cluster) Down() error { return c.DownContext(context.Background()) }

// DownContext is Down, given up when ctx is done.
func (c *Cluster) DownContext(ctx context.Context) error {
	return c.Script(ctx, "hack/cluster-down.sh")
}

// Script runs a hack/ script with the cluster's settings; its output goes
// to stderr, as progress.
func (c *Cluster) Script(ctx context.Context, path string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.Root, path), args...)
	cmd.Dir = c.Root
	cmd.Env = append(os.Environ(), c.Settings...)
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	// The scripts start daemons that keep their own output files; do not
	// wait on pipes they might hold once the script itself has ended.
	cmd.WaitDelay = 5 * time.Second
	return cmd.Run()
}

// KubectlCmd returns kubectl with the admin kubeconfig and args.
func (c *Cluster) KubectlCmd(args ...string) *exec.Cmd {
	return exec.Command(c.Kubectl, append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
}

// load reads the KEY=value lines cluster-up.sh writes to cluster.env.
func (c *Cluster) load() error {
	path := filepath.Join(c.Dir, "cluster.env")
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	vars := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(s.Text()), "="); ok {
			vars[k] = strings.Trim(v, `"'`)
		}
	}
	if err := s.Err(); err != nil {
		return err
	}
	c.Kubeconfig, c.Kubectl = vars["KUBECONFIG"], vars["KUBECTL"]
	if c.Kubeconfig == "" || c.Kubectl == "" {
		return fmt.Errorf("%s lacks KUBECONFIG or KUBECTL", path)
	}
	if _, err := os.Stat(c.Kubectl); err != nil {
		return fmt.Errorf("the pinned kubectl named in %s: %w", path, err)
	}
	return nil
}

// Fresh starts the cluster anew for a suite named suite: it stops whatever
// still runs in Dir (a cluster that an earlier run left up with
// KEEP_CLUSTER, say), starts the cluster with an empty etcd, and points
// kubectl's discovery cache (KUBECACHEDIR) at a directory of this run, since
// a cache of an earlier run names API versions this one may not serve.
// The returned stop ends it all, but leaves the cluster up when the
// environment sets KEEP_CLUSTER. Progress goes to stderr.
func (c *Cluster) Fresh(suite string) (stop func(), err error) {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	cache, err := os.MkdirTemp(c.Dir, "kubectl-cache-")
	if err != nil {
		return nil, err
	}
	if err := os.Setenv("KUBECACHEDIR", cache); err != nil {
		return nil, err
	}
	if err := c.Down(); err != nil {
		return nil, fmt.Errorf("stopping the cluster left in %s: %w", c.Dir, err)
	}
	start := time.Now()
	if err := c.Up(); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "%s: control plane up in %s\n", suite, time.Since(start).Round(100*time.Millisecond))
	return func() {
		_ = os.RemoveAll(cache)
		if os.Getenv("KEEP_CLUSTER") != "" {
			fmt.Fprintf(os.Stderr, "%s: KEEP_CLUSTER is set: the cluster stays up\n  %s --kubeconfig %s get mpijobs -A\n",
				suite, c.Kubectl, c.Kubeconfig)
			return
		}
		if err := c.Down(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: stopping the control plane: %v\n", suite, err)
		}
	}, nil
}

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
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
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
