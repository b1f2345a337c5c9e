package kueue

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"

	"github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// exampleFile is the repository's Kueue example, from its root.
var exampleFile = filepath.Join("examples", "kueue-v2", "elastic-kueue.yaml")

// TestKueueExample applies examples/kueue-v2 as its README does: Kueue
// admits the example's job to the example's ClusterQueue, and the job runs
// its launcher and workers.
func TestKueueExample(t *testing.T) {
	ns := suite.Namespace(t)
	path := filepath.Join(suite.Root, exampleFile)
	names := objectNames(t, path)
	for _, kind := range []string{"ResourceFlavor", "ClusterQueue", "LocalQueue", "MPIJob"} {
		if names[kind] == "" {
			t.Fatalf("%s holds no %s", exampleFile, kind)
		}
	}
	if out, err := suite.KubectlCmd(context.Background(), "apply", "-n", ns, "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("applying %s: %v\n%s", exampleFile, err, out)
	}
	t.Cleanup(func() {
		// The namespace's deletion takes the LocalQueue and the job.
		out, err := suite.KubectlCmd(context.Background(), "delete", "--wait=false", "--ignore-not-found",
			"clusterqueue/"+names["ClusterQueue"], "resourceflavor/"+names["ResourceFlavor"]).CombinedOutput()
		if err != nil {
			t.Logf("deleting the example's queues: %v\n%s", err, out)
		}
	})

	job := getJob(t, &v2beta1.MPIJob{ObjectMeta: metav1.ObjectMeta{Name: names["MPIJob"], Namespace: ns}})
	if job.Labels[queueNameLabel] != names["LocalQueue"] || !ptr.Deref(job.Spec.RunPolicy.Suspend, false) {
		t.Fatalf("the example's job is not created suspended in LocalQueue %s: labels %v, suspend %v",
			names["LocalQueue"], job.Labels, job.Spec.RunPolicy.Suspend)
	}
	workload, _ := waitWorkload(t, job, "")
	waitAdmittedTo(t, job, workload, names["ClusterQueue"])
	// The example's flavor has no node labels: Kueue adds no nodeSelector.
	workers := int(ptr.Deref(job.Spec.MPIReplicaSpecs[v2beta1.MPIReplicaTypeWorker].Replicas, 1))
	checkRunningWith(t, job, workers, nil)
}

// objectNames reads a YAML file's objects: the name of each kind.
func objectNames(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names := map[string]string{}
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var obj struct {
			metav1.TypeMeta   `json:",inline"`
			metav1.ObjectMeta `json:"metadata"`
		}
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return names
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		names[obj.Kind] = obj.Name
	}
}
