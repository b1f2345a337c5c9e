package integration

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow/mpi-operator/pkg/controller"
	"github.com/kubeflow/mpi-operator/test/harness"
)

// TestDrainCountsFromTheUnlistingWrite: while an admission policy refuses
// every update of the job's ConfigMap, a scale 4 -> 2 with drainSeconds 5
// deletes no worker: the victims leave discover_hosts.sh only once a write
// goes through. The operator is stopped during the refusal and a new one
// started after it, later than drainSeconds after the scale, as a
// fail-over would; still each victim is deleted at least drainSeconds
// after the successful write that unlisted it, never while listed.
func TestDrainCountsFromTheUnlistingWrite(t *testing.T) {
	const (
		drain = 5 * time.Second
		hold  = 8 * time.Second // longer than drain
	)
	ns := env.Namespace(t)
	stop := startController(t, controller.Config{Namespace: ns, RefreshLauncher: true})
	createJob(t, elasticJob(ns, "shrink", 4, 1, 4, int32(drain/time.Second)))
	waitForHosts(t, ns, "shrink", hostsOf("shrink", 0, 1, 2, 3)...)
	rec, err := harness.RecordDrain(context.Background(), env.Kube, ns, "shrink-config", "mpi-job-role=worker,mpi-job-name=shrink")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rec.Stop)

	allow := refuseUpdates(t, "hold-files-"+ns, ns, admissionv1.Rule{
		APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"},
	}, "object.metadata.name != 'shrink-config'", "the files are held")
	harness.Eventually(t, poll, waitTimeout, "the API server to refuse writes of shrink-config", func() (bool, error) {
		cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "shrink-config", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, err = env.Kube.CoreV1().ConfigMaps(ns).Update(context.Background(), cm, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "the files are held"), nil
	})
	scaleWorkers(t, ns, "shrink", 2)
	time.Sleep(hold / 2)
	stop() // the leader goes while the files are held
	time.Sleep(hold / 2)
	if got := workerPods(t, ns, "shrink"); len(got) != 4 {
		t.Fatalf("workers %v while the files are held, want all 4", got)
	}
	if d := rec.Marked(); len(d) != 0 {
		t.Errorf("workers %v marked draining while discover_hosts.sh still lists them", d)
	}
	allow()
	startController(t, controller.Config{Namespace: ns, RefreshLauncher: true})
	waitForHosts(t, ns, "shrink", hostsOf("shrink", 0, 1)...)
	harness.Eventually(t, poll, waitTimeout, "the victims deleted", func() (bool, error) {
		return slices.Equal(workerPods(t, ns, "shrink"), namesOf("shrink", 0, 1)), nil
	})

	report, err := rec.CheckDrained(namesOf("shrink", 2, 3), drain)
	for _, line := range report {
		t.Log(line)
	}
	if err != nil {
		t.Error(err)
	}
}
