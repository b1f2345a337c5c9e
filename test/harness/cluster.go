// Package harness is what the suites of both modules (test/..., v2/test/...)
// and the programs under hack/ (bench, chaos) share to run against a real
// local control plane: starting that control plane (hack/cluster-up.sh) on
// free ports for a suite (Suite) or a program (StartCluster), restarting
// its API server, installing CRDs and the operator's RBAC with a
// ServiceAccount kubeconfig, running the operator binary (v1 or v2) as a
// child process and reading its log, polling, following the workers,
// discover_hosts.sh and launcher Roles of MPIJobs through watch events, and
// printing markdown tables.
package harness

import (
	"bufio"
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
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	clientset "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned"
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

// Cluster is a control plane, with admin clients.
type Cluster struct {
	Root string // the repository
	Dir  string // LOCAL_DIR of the scripts: cluster state, logs, kubeconfigs
	// Settings are the KEY=value environment of hack/cluster-up.sh (ports,
	// KWOK_NODES, LOCAL_DIR, ...) of a cluster the harness started, and so
	// stops; nil for an existing cluster.
	Settings []string

	Kubeconfig string // admin
	Kubectl    string // the pinned kubectl

	Config  *rest.Config
	Kube    kubernetes.Interface
	MPI     clientset.Interface // kubeflow.org/v1
	Dynamic dynamic.Interface

	// OperatorKubeconfig authenticates as the operator's ServiceAccount;
	// set by InstallOperator.
	OperatorKubeconfig string

	logf Logf
}

// StartCluster starts a fresh cluster in dir with hack/cluster-up.sh, on
// free ports (FreePorts) and with settings (more of its KEY=value
// environment: KWOK_NODES, extra flags; a port given here wins). A cluster
// left in dir by an earlier run is stopped first: cluster-up.sh would
// otherwise keep it, with whatever flags it had, and its etcd. On an error
// after the start the returned Cluster is not nil, so that the caller can
// stop it.
func StartCluster(ctx context.Context, root, dir, userAgent string, settings []string, logf Logf) (*Cluster, error) {
	ports, err := FreePorts(len(clusterPorts))
	if err != nil {
		return nil, err
	}
	c := &Cluster{Root: root, Dir: dir, logf: logf}
	for i, key := range clusterPorts {
		c.Settings = append(c.Settings, fmt.Sprintf("%s=%d", key, ports[i]))
	}
	c.Settings = append(append(c.Settings, settings...), "LOCAL_DIR="+dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	logf("stopping any earlier cluster in %s", dir)
	if err := c.script(ctx, "hack/cluster-down.sh"); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := c.script(ctx, "hack/cluster-up.sh"); err != nil {
		return c, fmt.Errorf("starting the control plane (logs in %s): %w", dir, err)
	}
	if err := c.load(); err != nil {
		return c, err
	}
	logf("cluster is up in %s (API server on port %s)", time.Since(start).Round(100*time.Millisecond), c.Setting("APISERVER_PORT"))
	return c, c.connect(userAgent)
}

// clusterPorts are the settings of hack/cluster-up.sh that StartCluster
// sets to free ports.
var clusterPorts = []string{"ETCD_PORT", "ETCD_PEER_PORT", "APISERVER_PORT", "CONTROLLER_MANAGER_PORT", "SCHEDULER_PORT"}

// Setting is the value of a setting of a cluster the harness started, or "".
func (c *Cluster) Setting(key string) string {
	for _, kv := range slices.Backward(c.Settings) {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// script runs a hack/ script with the cluster's settings; its output goes
// to stderr, as progress.
func (c *Cluster) script(ctx context.Context, path string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.Root, path))
	cmd.Dir = c.Root
	cmd.Env = append(os.Environ(), c.Settings...)
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	// The scripts start daemons that keep their own output files; do not
	// wait on pipes they might hold once the script itself has ended.
	cmd.WaitDelay = 5 * time.Second
	return cmd.Run()
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
	cfg.UserAgent = userAgent
	return c.SetQPS(cfg, 1000)
}

// SetQPS makes the clients anew from cfg with a client-side limit of qps
// requests a second, in bursts of twice that.
func (c *Cluster) SetQPS(cfg *rest.Config, qps float32) error {
	cfg.QPS, cfg.Burst = qps, 2*int(qps)
	c.Config = cfg
	var err error
	if c.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if c.MPI, err = clientset.NewForConfig(cfg); err != nil {
		return err
	}
	c.Dynamic, err = dynamic.NewForConfig(cfg)
	return err
}

// Started tells whether the harness started the cluster.
func (c *Cluster) Started() bool { return c != nil && c.Settings != nil }

// Stop stops the cluster the harness started, unless keep is set. It does
// nothing to an existing cluster.
func (c *Cluster) Stop(keep bool) {
	if !c.Started() {
		return
	}
	if keep {
		c.logf("leaving the cluster running: KUBECONFIG=%s; stop it with LOCAL_DIR=%s hack/cluster-down.sh", c.Kubeconfig, c.Dir)
		return
	}
	// A fresh context: the run's may be cancelled already.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.script(ctx, "hack/cluster-down.sh"); err != nil {
		c.logf("stopping the cluster: %v", err)
	}
}

// KubectlCmd is the pinned kubectl with the admin kubeconfig and args, run
// in the repository, without the KUBECONFIG of the environment.
func (c *Cluster) KubectlCmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, c.Kubectl, append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	cmd.Dir = c.Root
	cmd.Env = Environ("KUBECONFIG")
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// Environ is the process's environment without the given variables.
func Environ(drop ...string) []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(drop, k)
	})
}

// KubectlRun runs the pinned kubectl against the cluster as admin.
func (c *Cluster) KubectlRun(ctx context.Context, args ...string) error {
	out, err := c.KubectlCmd(ctx, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// InstallOperator installs the CRD and the operator's ClusterRole from the
// API's manifests, and its Lease's Role in OperatorNamespace, binds both
// roles (bindings bindingName) to the ServiceAccount
// OperatorNamespace/OperatorSA, and writes a kubeconfig with a
// token of that ServiceAccount to <Dir>/operator.kubeconfig. It returns
// once the garbage collector collects the children of deleted MPIJobs
// (WaitCollectable).
func (c *Cluster) InstallOperator(ctx context.Context, api API, bindingName string) error {
	// Server-side: the CRD is too large for the last-applied annotation of
	// a client-side apply if it carries every description.
	err := c.ApplyCRDs(ctx, false, filepath.Join(api.Manifests, "crd.yaml"), filepath.Join(api.Manifests, "cluster-role.yaml"))
	if err != nil {
		return err
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
	if err := clientcmd.WriteToFile(*kc, c.OperatorKubeconfig); err != nil {
		return err
	}
	return c.WaitCollectable(ctx, api)
}

// EnsureNamespace creates a namespace and waits for its default
// ServiceAccount, without which pods are refused.
func (c *Cluster) EnsureNamespace(ctx context.Context, name string) error {
	_, err := c.Kube.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return Poller{}.Until(ctx, time.Minute, func() (bool, error) {
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
	return Poller{Every: time.Second}.Until(ctx, timeout, func() (bool, error) {
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
