package e2e

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow/mpi-operator/test/harness"
)

const (
	// tenantNS holds a tenant's ConfigMaps and ServiceAccounts, which no
	// MPIJob owns.
	tenantNS = "tenant-configmaps"
	// tenantConfigMaps of tenantConfigMapSize each are created there.
	tenantConfigMaps    = 150
	tenantConfigMapSize = 900 << 10
	// tenantServiceAccounts, each with tenantAnnotationSize of
	// annotations (the API server refuses more than 256 KiB), are created
	// there.
	tenantServiceAccounts = 150
	tenantAnnotationSize  = 200 << 10
	// maxTenantGrowth bounds the operator's RSS growth while each kind
	// comes; so do the bytes of the objects of that kind (checkTenantGrowth).
	maxTenantGrowth = 48 << 20
	// rssPeriod is how often the operator's RSS is sampled.
	rssPeriod = 200 * time.Millisecond
)

// TestTenantConfigMaps creates, in a namespace of a tenant's, large objects
// named and labelled as the operator's own are, which its informer's label
// filter therefore lets through, and checks that the operator's resident
// set grows little while each kind comes: it keeps only the metadata of the
// ConfigMaps and ServiceAccounts that no MPIJob controls. First come
// ServiceAccounts with 200 KiB of annotations ("<job>-launcher",
// app=<job>), to a fresh operator whose heap has no room freed by an
// earlier step to hide them in, then ConfigMaps of 900 KiB ("<job>-config",
// app=<job>). It runs an operator of its own, so that it can run alone
// (-run TestTenantConfigMaps) as well as after TestE2E.
func TestTenantConfigMaps(t *testing.T) {
	ensureInstalled(t)
	op := startOperator(t, operatorKubeconfig(t, operatorNamespace), filepath.Join(env.Dir, "operator-tenant.log"))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of the operator log %s:\n%s", op.LogPath, harness.Tail(op.LogPath, 40))
		}
		op.Terminate(operatorStopLimit)
		currentOperator = nil
	})
	waitLeader(t, op)

	ctx := context.Background()
	if err := env.FreshNamespace(ctx, tenantNS); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.DeleteNamespace(ctx, tenantNS, 2*time.Minute); err != nil {
			t.Errorf("deleting namespace %s: %v", tenantNS, err)
		}
	})

	notes := strings.Repeat("x", tenantAnnotationSize)
	t.Run("ServiceAccounts", func(t *testing.T) {
		checkTenantGrowth(t, op, "ServiceAccounts", tenantServiceAccounts, tenantAnnotationSize, func(ctx context.Context, job string) error {
			sa := &corev1.ServiceAccount{
				ObjectMeta: metav1.ObjectMeta{Name: job + "-launcher", Labels: map[string]string{"app": job},
					Annotations: map[string]string{"example.com/notes": notes}},
			}
			_, err := env.Kube.CoreV1().ServiceAccounts(tenantNS).Create(ctx, sa, metav1.CreateOptions{})
			return err
		})
	})
	data := strings.Repeat("x", tenantConfigMapSize)
	t.Run("ConfigMaps", func(t *testing.T) {
		checkTenantGrowth(t, op, "ConfigMaps", tenantConfigMaps, tenantConfigMapSize, func(ctx context.Context, job string) error {
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: job + "-config", Labels: map[string]string{"app": job}},
				Data:       map[string]string{"hostfile": data},
			}
			_, err := env.Kube.CoreV1().ConfigMaps(tenantNS).Create(ctx, cm, metav1.CreateOptions{})
			return err
		})
	})
	if !op.Alive() {
		t.Fatalf("the operator exited: %s", op.Status())
	}
}

// checkTenantGrowth creates n objects of size bytes each through create,
// for jobs named train-0 to train-<n-1>, 8 at a time, and fails t when the
// peak RSS of op rises above what it was before by maxTenantGrowth or by
// the n*size bytes created, whichever is less: a cache that kept the
// objects would hold at least those bytes.
func checkTenantGrowth(t *testing.T, op *harness.Operator, kind string, n, size int,
	create func(ctx context.Context, job string) error) {
	t.Helper()
	ctx := context.Background()
	// The operator's first lists and syncs, or the previous step, are
	// behind it.
	time.Sleep(5 * time.Second)

	rss, err := harness.WatchRSS(op.PID, rssPeriod)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	errs := make([]error, n)
	slots := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			errs[i] = create(ctx, fmt.Sprintf("train-%d", i))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_, _ = rss.Stop()
		t.Fatalf("creating the tenant's %s: %v", kind, err)
	}
	created := time.Since(start)
	// Let the watch events reach the operator and its garbage be collected.
	time.Sleep(15 * time.Second)
	mem, err := rss.Stop()
	if err != nil {
		t.Fatalf("sampling the operator's RSS: %v (%s)", err, op.Status())
	}
	t.Logf("%d %s of %d KiB labelled app created in %v; operator %s",
		n, kind, size>>10, created.Round(100*time.Millisecond), mem)
	if limit := min(maxTenantGrowth, int64(n)*int64(size)); mem.Growth() >= limit {
		t.Errorf("the operator's RSS grew by %.1f MiB for a tenant's %s, want less than %.1f MiB",
			harness.MiB(mem.Growth()), kind, harness.MiB(limit))
	}
}

// ensureInstalled applies the standalone overlay, as the install step of
// TestE2E does, unless the CRD and the operator's ServiceAccount are there
// already, and scales its Deployment to zero: the operator under test is a
// local process.
func ensureInstalled(t *testing.T) {
	t.Helper()
	if kubectl("get", "crd/mpijobs.kubeflow.org", "serviceaccount/mpi-operator", "-n", operatorNamespace).ok() {
		return
	}
	t.Logf("kubectl apply -k manifests/overlays/standalone:\n%s", mustKubectl(t, "apply", "-k", "manifests/overlays/standalone"))
	waitServed(t, "v1")
	mustKubectl(t, "scale", "deployment/mpi-operator", "-n", operatorNamespace, "--replicas=0")
}
