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
	// configMapTenantNS holds a tenant's ConfigMaps, which no MPIJob owns.
	configMapTenantNS = "tenant-configmaps"
	// tenantConfigMaps of tenantConfigMapSize each are created there.
	tenantConfigMaps    = 150
	tenantConfigMapSize = 900 << 10
	// maxTenantGrowth bounds the operator's RSS growth while they come.
	maxTenantGrowth = 48 << 20
	// rssPeriod is how often the operator's RSS is sampled.
	rssPeriod = 200 * time.Millisecond
)

// TestTenantConfigMaps creates, in a namespace of a tenant's, ConfigMaps of
// 900 KiB named and labelled as the operator's own ConfigMaps are
// ("<job>-config", app=<job>), which its informer's label filter therefore
// lets through, and checks that the operator's resident set grows by less
// than maxTenantGrowth: it keeps only the metadata of the ConfigMaps that
// no MPIJob controls. It runs a fresh operator of its own, so that it can
// run alone (-run TestTenantConfigMaps) as well as after TestE2E.
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
	if err := env.FreshNamespace(ctx, configMapTenantNS); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.DeleteNamespace(ctx, configMapTenantNS, 2*time.Minute); err != nil {
			t.Errorf("deleting namespace %s: %v", configMapTenantNS, err)
		}
	})
	// The operator's first lists and syncs are behind it.
	time.Sleep(5 * time.Second)

	rss, err := harness.WatchRSS(op.PID, rssPeriod)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	blob := strings.Repeat("x", tenantConfigMapSize)
	errs := make([]error, tenantConfigMaps)
	slots := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range tenantConfigMaps {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			job := fmt.Sprintf("train-%d", i)
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: job + "-config", Labels: map[string]string{"app": job}},
				Data:       map[string]string{"hostfile": blob},
			}
			_, errs[i] = env.Kube.CoreV1().ConfigMaps(configMapTenantNS).Create(ctx, cm, metav1.CreateOptions{})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("creating the tenant's ConfigMaps: %v", err)
	}
	created := time.Since(start)
	// Let the watch events reach the operator and its garbage be collected.
	time.Sleep(15 * time.Second)
	mem, err := rss.Stop()
	if err != nil {
		t.Fatalf("sampling the operator's RSS: %v (%s)", err, op.Status())
	}
	t.Logf("%d ConfigMaps of %d KiB labelled app created in %v; operator %s",
		tenantConfigMaps, tenantConfigMapSize>>10, created.Round(100*time.Millisecond), mem)
	if mem.Growth() >= maxTenantGrowth {
		t.Errorf("the operator's RSS grew by %.1f MiB for a tenant's ConfigMaps, want less than %d MiB",
			harness.MiB(mem.Growth()), maxTenantGrowth>>20)
	}
	if !op.Alive() {
		t.Fatalf("the operator exited: %s", op.Status())
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
