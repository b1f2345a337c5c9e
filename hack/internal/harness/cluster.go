// Package harness holds what the programs under hack/ that run the real
// operator binary against a real local control plane share: starting that
// control plane (hack/cluster-up.sh through test/testcluster) and restarting
// its API server, installing the operator's CRD and RBAC with a
// ServiceAccount kubeconfig, running the operator as a child process and
// reading its log, following the workers, discover_hosts.sh and launcher
// Roles of MPIJobs through watch events, and printing markdown tables.
package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	clientset "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned"
	"github.com/kubeflow/mpi-operator/test/testcluster"
)

// The operator's identity: it runs with a token of this ServiceAccount, so
// it has exactly the permissions manifests/base gives it.
const (
	OperatorNamespace = "mpi-operator"
	OperatorSA        = "mpi-operator"
	OperatorUser      = "system:serviceaccount:" + OperatorNamespace + ":" + OperatorSA
	// LeaseName is the operator's leader-election Lease in OperatorNamespace.
	LeaseName = "mpi-operator"
)

// Logf prints a line of progress.
type Logf func(format string, args ...any)

// Cluster is the control plane a harness runs on.
type Cluster struct {
	Root string // the repository
	Dir  string // the harness's directory: cluster state, logs, kubeconfigs
	// TC is the cluster the harness started (and so stops); nil for an
	// existing cluster.
	TC *testcluster.Cluster

	Kubeconfig string // admin
	Kubectl    string // the pinned kubectl

	Config  *rest.Config
	Kube    kubernetes.Interface
	MPI     clientset.Interface
	Dynamic dynamic.Interface

	// OperatorKubeconfig authenticates as the operator's ServiceAccount;
	// set by InstallOperator.
	OperatorKubeconfig string

	logf Logf
}

// StartCluster starts a fresh cluster in dir with hack/cluster-up.sh and
// settings (its KEY=value environment: ports, KWOK_NODES, extra flags). A
// cluster left in dir by an earlier run is stopped first: cluster-up.sh
// would otherwise keep it, with whatever flags it had. On an error after
// the start the returned Cluster is not nil, so that the caller can stop
// it.
func StartCluster(ctx context.Context, root, dir, userAgent string, settings []string, logf Logf) (*Cluster, error) {
	c := &Cluster{Root: root, Dir: dir, logf: logf}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c.TC = &testcluster.Cluster{Root: root, Dir: dir, Settings: append(slices.Clone(settings), "LOCAL_DIR="+dir)}
	logf("stopping any earlier cluster in %s", dir)
	if err := c.TC.DownContext(ctx); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := c.TC.UpContext(ctx); err != nil {
		return c, err
	}
	c.Kubeconfig, c.Kubectl = c.TC.Kubeconfig, c.TC.Kubectl
	logf("cluster is up in %s", time.Since(start).Round(time.Second))
	return c, c.connect(userAgent)
}

// UseCluster connects to an existing cluster, which the harness neither
// starts nor stops. kubectl "" means the pinned one of hack/testbin.sh.
func UseCluster(ctx context.Context, root, dir, kubeconfig, kubectl, userAgent string, logf Logf) (*Cluster, error) {
	c := &Cluster{Root: root, Dir: dir, Kubeconfig: kubeconfig, Kubectl: kubectl, logf: logf}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if c.Kubectl == "" {
		out, err := exec.CommandContext(ctx, filepath.Join(root, "hack", "testbin.sh"), "--print-dir").Output()
		if err != nil {
			return nil, fmt.Errorf("finding the pinned kubectl (hack/testbin.sh --print-dir): %w", err)
		}
		c.Kubectl = filepath.Join(strings.TrimSpace(string(out)), "bin", "kubectl")
	}
	return c, c.connect(userAgent)
}

func (c *Cluster) connect(userAgent string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return err
	}
	// The harness's own requests must not queue behind a client-side limit.
	cfg.QPS = 1000
	cfg.Burst = 2000
	cfg.UserAgent = userAgent
	c.Config = cfg
	if c.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if c.MPI, err = clientset.NewForConfig(cfg); err != nil {
		return err
	}
	c.Dynamic, err = dynamic.NewForConfig(cfg)
	return err
}

// Stop stops the cluster the harness started, unless keep is set. It does
// nothing to an existing cluster.
func (c *Cluster) Stop(keep bool) {
	if c == nil || c.TC == nil {
		return
	}
	if keep {
		c.logf("leaving the cluster running: KUBECONFIG=%s; stop it with LOCAL_DIR=%s hack/cluster-down.sh", c.Kubeconfig, c.Dir)
		return
	}
	// A fresh context: the run's may be cancelled already.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.TC.DownContext(ctx); err != nil {
		c.logf("stopping the cluster: %v", err)
	}
}

// KubectlRun runs the pinned kubectl against the cluster as admin.
func (c *Cluster) KubectlRun(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, c.Kubectl, append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	cmd.Dir = c.Root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// InstallOperator installs the CRD and the operator's ClusterRole from the
// API's manifests, and its Lease's Role in OperatorNamespace, binds both
// roles (bindings bindingName) to the ServiceAccount
// OperatorNamespace/OperatorSA, and writes a kubeconfig with a
// token of that ServiceAccount to <Dir>/operator.kubeconfig.
func (c *Cluster) InstallOperator(ctx context.Context, api API, bindingName string) error {
	// Server-side: the CRD is too large for the last-applied annotation of
	// a client-side apply if it carries every description.
	for _, f := range []string{"crd.yaml", "cluster-role.yaml"} {
		if err := c.KubectlRun(ctx, "apply", "--server-side", "--force-conflicts", "-f", filepath.Join(api.Manifests, f)); err != nil {
			return err
		}
	}
	// kubectl wait fails outright while a new CRD has no status yet.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return c.KubectlRun(ctx, "wait", "--for=condition=Established", "--timeout=5s", "crd/mpijobs.kubeflow.org") == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the MPIJob CRD to be Established: %w", err)
	}
	if err := c.EnsureNamespace(ctx, OperatorNamespace); err != nil {
		return err
	}
	_, err = c.Kube.CoreV1().ServiceAccounts(OperatorNamespace).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: OperatorSA}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// The Lease's Role, in the operator's namespace.
	if err := c.KubectlRun(ctx, "apply", "-n", OperatorNamespace, "-f", filepath.Join(api.Manifests, "role.yaml")); err != nil {
		return err
	}
	// The account's bindings to that Role and to the ClusterRole.
	meta := metav1.ObjectMeta{Name: bindingName}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: OperatorSA, Namespace: OperatorNamespace}}
	ref := func(kind string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: "mpi-operator"}
	}
	for _, bind := range []func() error{
		func() error {
			_, err := c.Kube.RbacV1().RoleBindings(OperatorNamespace).Create(ctx,
				&rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: ref("Role"), Subjects: subjects}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.Kube.RbacV1().ClusterRoleBindings().Create(ctx,
				&rbacv1.ClusterRoleBinding{ObjectMeta: meta, RoleRef: ref("ClusterRole"), Subjects: subjects}, metav1.CreateOptions{})
			return err
		},
	} {
		if err := bind(); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	tr, err := c.Kube.CoreV1().ServiceAccounts(OperatorNamespace).CreateToken(ctx, OperatorSA,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](48 * 3600)}},
		metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating a token for ServiceAccount %s/%s: %w", OperatorNamespace, OperatorSA, err)
	}
	admin, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		return err
	}
	cur := admin.Contexts[admin.CurrentContext]
	if cur == nil || admin.Clusters[cur.Cluster] == nil {
		return fmt.Errorf("%s has no current context with a cluster", c.Kubeconfig)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = admin.Clusters[cur.Cluster].DeepCopy()
	kc.AuthInfos[OperatorSA] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["operator"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: OperatorSA}
	kc.CurrentContext = "operator"
	c.OperatorKubeconfig = filepath.Join(c.Dir, "operator.kubeconfig")
	return clientcmd.WriteToFile(*kc, c.OperatorKubeconfig)
}

// EnsureNamespace creates a namespace and waits for its default
// ServiceAccount, without which pods are refused.
func (c *Cluster) EnsureNamespace(ctx context.Context, name string) error {
	_, err := c.Kube.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.Kube.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// FreshNamespace deletes what an earlier run (on a kept or existing
// cluster) left in the namespace, then creates it anew.
func (c *Cluster) FreshNamespace(ctx context.Context, name string) error {
	if _, err := c.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); err == nil {
		c.logf("deleting namespace %s, left by an earlier run", name)
		if err := c.DeleteNamespace(ctx, name, 5*time.Minute); err != nil {
			return fmt.Errorf("deleting namespace %s of an earlier run: %w", name, err)
		}
	}
	return c.EnsureNamespace(ctx, name)
}

// DeleteNamespace deletes a namespace and waits up to timeout for it to be
// gone (its pods deleted by kwok).
func (c *Cluster) DeleteNamespace(ctx context.Context, name string, timeout time.Duration) error {
	err := c.Kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		_, err := c.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// Ready tells whether the API server answers /readyz with "ok".
func (c *Cluster) Ready(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	body, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err == nil && string(body) == "ok"
}

// errNotStarted is returned for what only a cluster the harness started
// allows.
var errNotStarted = errors.New("the harness did not start this cluster")
