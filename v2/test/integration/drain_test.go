package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// TestDrainCountsFromTheUnlistingWrite: while an admission policy refuses
// every update of the job's ConfigMap, a scale 3 -> 1 with drainSeconds 3
// marks and deletes no worker. The controller is stopped during the
// refusal and a new one started after it, later than drainSeconds after
// the scale, as a fail-over would; still each victim is deleted at least
// drainSeconds after the successful write that unlisted it.
func TestDrainCountsFromTheUnlistingWrite(t *testing.T) {
	t.Parallel()
	const (
		drain = 3 * time.Second
		hold  = 6 * time.Second // longer than drain
	)
	ctx := context.Background()
	ns := jobNamespace(t)
	running := startController(t, ns, nil)
	createJob(t, elasticJob(ns, "shrink", 3, 1, 3, int32(drain/time.Second)))
	settled(t, ns, "shrink", 3)
	rec, err := harness.RecordDrain(ctx, suite.Kube, ns, "shrink-config", labelJobRole+"=worker,"+labelJobName+"=shrink")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rec.Stop)

	allow, err := harness.RefuseUpdates(ctx, suite.Kube, "hold-files-"+ns, ns, admissionv1.Rule{
		APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"},
	}, "object.metadata.name != 'shrink-config'", "the files are held")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = allow() })
	harness.Eventually(t, poll, waitTimeout, "the API server to refuse writes of shrink-config", func() (bool, error) {
		cm, err := suite.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "shrink-config", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, err = suite.Kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "the files are held"), nil
	})
	scaleJob(t, ns, "shrink", 1)
	time.Sleep(hold / 2)
	running.stop() // the leader goes while the files are held
	time.Sleep(hold / 2)
	if got := workerPods(t, ns, "shrink", true); len(got) != 3 {
		t.Fatalf("workers %v while the files are held, want all 3", podNames(got))
	}
	if marked := rec.Marked(); len(marked) != 0 {
		t.Errorf("workers %v marked draining while discover_hosts.sh still lists them", marked)
	}
	if err := allow(); err != nil {
		t.Fatal(err)
	}
	startController(t, ns, nil)
	settled(t, ns, "shrink", 1)
	report, err := rec.CheckDrained(workerNames("shrink", 1, 2), drain)
	for _, line := range report {
		t.Log(line)
	}
	if err != nil {
		t.Error(err)
	}
}
