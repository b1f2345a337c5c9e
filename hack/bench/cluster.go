package main

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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	clientset "github.com/kubeflow/mpi-operator/pkg/client/clientset/versioned"
	"github.com/kubeflow/mpi-operator/test/testcluster"
)

// Ports of the bench's own cluster: none of them is used by the other
// clusters of this repository (local dev, integration, e2e), and all are
// below Linux's ephemeral range (32768-60999), where any outgoing
// connection could hold them.
var clusterPorts = []string{
	"ETCD_PORT=27790",
	"ETCD_PEER_PORT=27800",
	"APISERVER_PORT=27443",
	"CONTROLLER_MANAGER_PORT=27257",
	"SCHEDULER_PORT=27259",
}

const (
	operatorNamespace = "mpi-operator"
	operatorSA        = "mpi-operator"
	// operatorUser is the operator's identity in the API server's audit
	// log: it runs with a token of this ServiceAccount.
	operatorUser = "system:serviceaccount:" + operatorNamespace + ":" + operatorSA
	// benchRBACName names the ClusterRoleBinding the bench creates.
	benchRBACName = "mpi-operator-bench"
)

// cluster is the control plane the bench runs on.
type cluster struct {
	root     string
	localDir string
	// tc is the cluster the bench started (and so stops); nil for an
	// existing cluster.
	tc *testcluster.Cluster

	kubeconfig string // admin
	kubectl    string
	// auditLog is the API server's audit log, or "" when the bench cannot
	// read one (an existing cluster given without --audit-log).
	auditLog string
	// params describes the cluster for the report.
	params string

	cfg  *rest.Config
	kube kubernetes.Interface
	mpi  clientset.Interface

	// operatorKubeconfig authenticates as the operator's ServiceAccount.
	operatorKubeconfig string
}

// clusterCapacity is the KWOK node count and pods per node for the run.
func clusterCapacity(o *options) (nodes, podsPerNode int) {
	podsPerNode = o.kwokNodePods
	nodes = o.kwokNodes
	if nodes > 0 {
		return nodes, podsPerNode
	}
	want := 0
	if o.runs(scenarioLatency) {
		want += o.jobs * (o.maxWorkers + 1)
	}
	if o.runs(scenarioMemory) {
		want += o.memPods + o.memJobs()
	}
	// 10% spare: the scheduler spreads pods, it does not pack them.
	nodes = (want*11/10 + podsPerNode - 1) / podsPerNode
	return max(nodes, 2), podsPerNode
}

// startCluster starts a fresh cluster with hack/cluster-up.sh, with the API
// server's audit log on for the operator's ServiceAccount. A cluster left
// in the bench's directory by an earlier run is stopped first: cluster-up.sh
// would otherwise keep it, with whatever flags it had.
func startCluster(ctx context.Context, o *options) (*cluster, error) {
	c := &cluster{root: o.root, localDir: o.localDir}
	if err := os.MkdirAll(c.localDir, 0o755); err != nil {
		return nil, err
	}
	policy := filepath.Join(c.localDir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy(operatorUser)), 0o644); err != nil {
		return nil, err
	}
	c.auditLog = filepath.Join(c.localDir, "audit.log")
	for _, f := range []string{c.auditLog} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	nodes, podsPerNode := clusterCapacity(o)
	c.tc = &testcluster.Cluster{Root: c.root, Dir: c.localDir}
	c.tc.Settings = append(slices.Clone(clusterPorts),
		"LOCAL_DIR="+c.localDir,
		fmt.Sprintf("KWOK_NODES=%d", nodes),
		fmt.Sprintf("KWOK_NODE_PODS=%d", podsPerNode),
		"CLUSTER_UP_TIMEOUT=300",
		// Written as the operator's requests complete; never rotated.
		"APISERVER_EXTRA_ARGS=--audit-policy-file="+policy+" --audit-log-path="+c.auditLog+
			" --audit-log-maxsize=100000 --audit-log-format=json",
		// Neither garbage collection nor binding should be what the
		// operator waits for.
		"CONTROLLER_MANAGER_EXTRA_ARGS=--kube-api-qps=200 --kube-api-burst=400",
		"SCHEDULER_EXTRA_ARGS=--kube-api-qps=200 --kube-api-burst=400",
	)
	c.params = fmt.Sprintf("fresh local control plane (hack/cluster-up.sh): %d kwok nodes x %d pods; "+
		"kube-controller-manager and kube-scheduler at --kube-api-qps=200 --kube-api-burst=400", nodes, podsPerNode)

	logf("stopping any earlier bench cluster in %s", c.localDir)
	if err := c.tc.DownContext(ctx); err != nil {
		return nil, err
	}
	logf("starting the cluster: %d kwok nodes x %d pods (hack/cluster-up.sh)", nodes, podsPerNode)
	start := time.Now()
	if err := c.tc.UpContext(ctx); err != nil {
		// Whatever started is stopped by the caller's c.stop().
		return c, err
	}
	c.kubeconfig, c.kubectl = c.tc.Kubeconfig, c.tc.Kubectl
	logf("cluster is up in %s", time.Since(start).Round(time.Second))
	return c, c.connect()
}

// useCluster connects to an existing cluster; the bench neither starts nor
// stops it.
func useCluster(ctx context.Context, o *options) (*cluster, error) {
	c := &cluster{root: o.root, localDir: o.localDir, kubeconfig: o.kubeconfig, auditLog: o.auditLog, kubectl: o.kubectl}
	if err := os.MkdirAll(c.localDir, 0o755); err != nil {
		return nil, err
	}
	if c.kubectl == "" {
		out, err := exec.CommandContext(ctx, filepath.Join(o.root, "hack", "testbin.sh"), "--print-dir").Output()
		if err != nil {
			return nil, fmt.Errorf("finding the pinned kubectl (hack/testbin.sh --print-dir): %w", err)
		}
		c.kubectl = filepath.Join(strings.TrimSpace(string(out)), "bin", "kubectl")
	}
	c.params = "existing cluster from " + o.kubeconfig
	if c.auditLog == "" {
		c.params += " (no audit log: API requests of the operator not counted)"
	}
	return c, c.connect()
}

func (c *cluster) connect() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return err
	}
	// The bench's own requests must not queue behind a client-side limit.
	cfg.QPS = 1000
	cfg.Burst = 2000
	cfg.UserAgent = "mpi-operator-bench"
	c.cfg = cfg
	if c.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	c.mpi, err = clientset.NewForConfig(cfg)
	return err
}

// stop stops a cluster the bench started, unless keep is set. On a
// cluster it did not start, it deletes its namespaces and binding instead
// (without waiting); the CRD and the operator's ServiceAccount stay.
func (c *cluster) stop(keep bool) {
	if c == nil || keep && c.tc == nil {
		return
	}
	if c.tc == nil {
		if c.kube == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, ns := range []string{latencyNamespace, memoryNamespace} {
			if err := c.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				logf("deleting namespace %s: %v", ns, err)
			}
		}
		if err := c.kube.RbacV1().ClusterRoleBindings().Delete(ctx, benchRBACName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			logf("deleting ClusterRoleBinding %s: %v", benchRBACName, err)
		}
		return
	}
	if keep {
		logf("leaving the cluster running (--keep-cluster): KUBECONFIG=%s; stop it with LOCAL_DIR=%s hack/cluster-down.sh", c.kubeconfig, c.localDir)
		return
	}
	// A fresh context: the run's may be cancelled already.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.tc.DownContext(ctx); err != nil {
		logf("stopping the cluster: %v", err)
	}
}

// kubectlRun runs the pinned kubectl against the cluster as admin.
func (c *cluster) kubectlRun(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, c.kubectl, append([]string{"--kubeconfig", c.kubeconfig}, args...)...)
	cmd.Dir = c.root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// installOperator installs the CRD and the operator's ClusterRole from
// manifests/base, binds the role to a ServiceAccount, and writes a
// kubeconfig with a token of that ServiceAccount. The operator runs with
// exactly the permissions the manifests give it, under an identity of its
// own in the audit log.
func (c *cluster) installOperator(ctx context.Context) error {
	// Server-side: the CRD is too large for the last-applied annotation of
	// a client-side apply if it carries every description.
	if err := c.kubectlRun(ctx, "apply", "--server-side", "--force-conflicts", "-f", filepath.Join("manifests", "base", "crd.yaml")); err != nil {
		return err
	}
	if err := c.kubectlRun(ctx, "apply", "--server-side", "--force-conflicts", "-f", filepath.Join("manifests", "base", "cluster-role.yaml")); err != nil {
		return err
	}
	// kubectl wait fails outright while a new CRD has no status yet.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return c.kubectlRun(ctx, "wait", "--for=condition=Established", "--timeout=5s", "crd/mpijobs.kubeflow.org") == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the MPIJob CRD to be Established: %w", err)
	}
	if err := c.ensureNamespace(ctx, operatorNamespace); err != nil {
		return err
	}
	_, err = c.kube.CoreV1().ServiceAccounts(operatorNamespace).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: operatorSA}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	_, err = c.kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: benchRBACName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "mpi-operator"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: operatorSA, Namespace: operatorNamespace}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	tr, err := c.kube.CoreV1().ServiceAccounts(operatorNamespace).CreateToken(ctx, operatorSA,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](48 * 3600)}},
		metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating a token for ServiceAccount %s/%s: %w", operatorNamespace, operatorSA, err)
	}
	admin, err := clientcmd.LoadFromFile(c.kubeconfig)
	if err != nil {
		return err
	}
	cur := admin.Contexts[admin.CurrentContext]
	if cur == nil || admin.Clusters[cur.Cluster] == nil {
		return fmt.Errorf("%s has no current context with a cluster", c.kubeconfig)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["bench"] = admin.Clusters[cur.Cluster].DeepCopy()
	kc.AuthInfos[operatorSA] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: operatorSA}
	kc.CurrentContext = "bench"
	c.operatorKubeconfig = filepath.Join(c.localDir, "operator.kubeconfig")
	return clientcmd.WriteToFile(*kc, c.operatorKubeconfig)
}

// ensureNamespace creates a namespace and waits for its default
// ServiceAccount, without which pods are refused.
func (c *cluster) ensureNamespace(ctx context.Context, name string) error {
	_, err := c.kube.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.kube.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// freshNamespace deletes what an earlier run (on a kept or existing
// cluster) left in the namespace, then creates it anew.
func (c *cluster) freshNamespace(ctx context.Context, name string) error {
	if _, err := c.kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); err == nil {
		logf("deleting namespace %s, left by an earlier run", name)
		if err := c.deleteNamespace(ctx, name, 5*time.Minute); err != nil {
			return fmt.Errorf("deleting namespace %s of an earlier run: %w", name, err)
		}
	}
	return c.ensureNamespace(ctx, name)
}

// deleteNamespace deletes a namespace and waits up to timeout for it to be
// gone (its pods deleted by kwok).
func (c *cluster) deleteNamespace(ctx context.Context, name string, timeout time.Duration) error {
	err := c.kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		_, err := c.kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// readAudit returns the operator's requests so far, waiting a moment for
// the last ones to reach the file.
func (c *cluster) readAudit() ([]auditEvent, error) {
	if c.auditLog == "" {
		return nil, errors.New("no audit log")
	}
	time.Sleep(time.Second)
	return readAudit(c.auditLog, operatorUser)
}
