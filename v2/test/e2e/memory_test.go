package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeflow/mpi-operator/test/harness"
)

const (
	// tenantObjects of each kind are created, labelled "app" as the
	// operator's children are.
	tenantObjects = 150
	// maxTenantGrowth bounds the operator's RSS growth while they come.
	maxTenantGrowth = 48 << 20
)

// checkTenantObjectsCostLittle creates, in a namespace of a tenant's,
// ConfigMaps of 900 KiB, Services with 200 KiB of annotations and suspended
// Jobs of 800 KiB, all labelled "app" like the operator's children, and
// checks that the operator's memory grows by less than maxTenantGrowth: its
// caches keep only the metadata of the objects no MPIJob controls.
func checkTenantObjectsCostLittle(t *testing.T, op *harness.Operator) {
	config, err := clientcmd.BuildConfigFromFlags("", suite.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	config.QPS, config.Burst = 100, 100
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "tenant-objects"
	t.Cleanup(func() { _, _ = kubectl("delete", "namespace", ns, "--wait=false") })
	waitNamespace(t, ns)

	rss, err := harness.WatchRSS(op.PID, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	blob := strings.Repeat("x", 900<<10)
	note := strings.Repeat("y", 200<<10)
	env := strings.Repeat("z", 600<<10)
	suspend := true
	create := func(i int) error {
		meta := func(kind string) metav1.ObjectMeta {
			return metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", kind, i), Labels: map[string]string{"app": fmt.Sprintf("web-%d", i)},
				Annotations: map[string]string{"note": note}}
		}
		cm := &corev1.ConfigMap{ObjectMeta: meta("config"), Data: map[string]string{"blob": blob}}
		cm.Annotations = nil
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return err
		}
		svc := &corev1.Service{ObjectMeta: meta("svc"), Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
		if _, err := kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return err
		}
		job := &batchv1.Job{ObjectMeta: meta("job"), Spec: batchv1.JobSpec{
			Suspend: &suspend,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "etl", Image: "busybox", Env: []corev1.EnvVar{{Name: "BLOB", Value: env}}}}}},
		}}
		_, err := kube.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
		return err
	}
	start := time.Now()
	errs := make(chan error, tenantObjects)
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				if err := create(i); err != nil {
					errs <- fmt.Errorf("tenant objects %d: %w", i, err)
				}
			}
		})
	}
	for i := range tenantObjects {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Let the watch events reach the operator and its garbage be collected.
	time.Sleep(15 * time.Second)
	mem, err := rss.Stop()
	if err != nil {
		t.Fatalf("sampling the operator's RSS: %v (%s)", err, op.Status())
	}
	t.Logf("%d ConfigMaps of 900 KiB, Services and Jobs created in %v; operator %s",
		tenantObjects, time.Since(start).Round(time.Second), mem)
	if mem.Growth() >= maxTenantGrowth {
		t.Errorf("the operator's RSS grew by %.1f MiB for a tenant's objects, want less than %d MiB", harness.MiB(mem.Growth()), maxTenantGrowth>>20)
	}
	if !op.Alive() {
		t.Fatalf("the operator exited: %s", op.Status())
	}
}
