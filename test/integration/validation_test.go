package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	common "github.com/kubeflow/common/pkg/apis/common/v1"

	"github.com/kubeflow/mpi-operator/pkg/controller"
)

// TestMalformedJobs sends malformed MPIJobs as raw JSON, the way any client
// can. Each one is either refused by the API server with a message naming
// the field, or accepted and then failed by the controller with a condition
// and a Warning event naming it; a good job created after them all still
// runs, so no bad object stops the controller.
func TestMalformedJobs(t *testing.T) {
	ns := newNamespace(t)
	startController(t, controller.Config{Namespace: ns})
	valid := func(name string) map[string]any {
		raw, err := json.Marshal(newJob(ns, name, 1))
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := json.Unmarshal(raw, &obj); err != nil {
			t.Fatal(err)
		}
		obj["apiVersion"], obj["kind"] = "kubeflow.org/v1", "MPIJob"
		return obj
	}
	specs := func(obj map[string]any) map[string]any {
		return obj["spec"].(map[string]any)["mpiReplicaSpecs"].(map[string]any)
	}
	replica := func(obj map[string]any, rt string) map[string]any { return specs(obj)[rt].(map[string]any) }

	cases := []struct {
		name   string
		mutate func(obj map[string]any)
		field  string // what the API server's message names
	}{
		{"no-launcher", func(o map[string]any) { delete(specs(o), "Launcher") }, "spec.mpiReplicaSpecs.Launcher"},
		{"two-launchers", func(o map[string]any) { replica(o, "Launcher")["replicas"] = 2 }, "spec.mpiReplicaSpecs.Launcher.replicas"},
		{"no-specs", func(o map[string]any) { delete(o["spec"].(map[string]any), "mpiReplicaSpecs") }, "spec.mpiReplicaSpecs"},
		{"negative-workers", func(o map[string]any) { replica(o, "Worker")["replicas"] = -1 }, "spec.mpiReplicaSpecs.Worker.replicas"},
		{"zero-slots", func(o map[string]any) { o["spec"].(map[string]any)["slotsPerWorker"] = 0 }, "spec.slotsPerWorker"},
		{"bad-clean-policy", func(o map[string]any) { o["spec"].(map[string]any)["cleanPodPolicy"] = "Sometimes" }, "spec.cleanPodPolicy"},
		{"bad-restart-policy", func(o map[string]any) { replica(o, "Worker")["restartPolicy"] = "Maybe" }, "spec.mpiReplicaSpecs.Worker.restartPolicy"},
		{"launcher-without-containers", func(o map[string]any) {
			replica(o, "Launcher")["template"] = map[string]any{"spec": map[string]any{"containers": []any{}}}
		}, "spec.mpiReplicaSpecs.Launcher.template.spec.containers"},
		{"launcher-without-template", func(o map[string]any) { delete(replica(o, "Launcher"), "template") }, "spec.mpiReplicaSpecs.Launcher.template"},
		{"workers-string", func(o map[string]any) { replica(o, "Worker")["replicas"] = "two" }, "spec.mpiReplicaSpecs.Worker.replicas"},
		{"name-too-long-for-a-label-value-" + strings.Repeat("x", 40), func(map[string]any) {}, "metadata.name"},
		{"min-above-max", func(o map[string]any) {
			o["spec"].(map[string]any)["elasticPolicy"] = map[string]any{"minReplicas": 3, "maxReplicas": 2}
		}, "spec.elasticPolicy.minReplicas"},
		{"drain-negative", func(o map[string]any) {
			o["spec"].(map[string]any)["elasticPolicy"] = map[string]any{"drainSeconds": -5}
		}, "spec.elasticPolicy.drainSeconds"},
	}
	ctx := context.Background()
	rest := env.mpi.KubeflowV1().RESTClient()
	for _, tc := range cases {
		obj := valid(tc.name)
		tc.mutate(obj)
		body, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		err = rest.Post().Namespace(ns).Resource("mpijobs").Body(body).Do(ctx).Error()
		if err == nil {
			t.Errorf("%s: accepted by the API server", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: rejected with %q, which does not name %s", tc.name, err, tc.field)
		}
	}

	// An unknown replica type is an unknown field: refused, by name, under
	// strict field validation, as kubectl asks for by default.
	unknown := valid("unknown-replica-type")
	specs(unknown)["Master"] = replica(unknown, "Worker")
	body, err := json.Marshal(unknown)
	if err != nil {
		t.Fatal(err)
	}
	err = rest.Post().Namespace(ns).Resource("mpijobs").Param("fieldValidation", "Strict").Body(body).Do(ctx).Error()
	if err == nil || !strings.Contains(err.Error(), "spec.mpiReplicaSpecs.Master") {
		t.Errorf("unknown replica type: error %v, want one naming spec.mpiReplicaSpecs.Master", err)
	}

	// What a schema cannot see: mainContainer naming no worker container.
	// The controller fails the job and says why.
	job := newJob(ns, "no-such-container", 1)
	job.Spec.MainContainer = "trainer"
	createJob(t, job)
	failed := waitForCondition(t, ns, "no-such-container", common.JobFailed, "InvalidMPIJobSpec")
	if c := condition(failed, common.JobFailed); !strings.Contains(c.Message, "spec.mainContainer") {
		t.Errorf("failure message %q does not name spec.mainContainer", c.Message)
	}
	waitForEvents(t, ns, "no-such-container", "Warning/InvalidMPIJobSpec")
	if got := workerPods(t, ns, "no-such-container"); len(got) != 0 {
		t.Errorf("an invalid job got workers: %v", got)
	}

	// A typo inside a pod template is refused when the client asks for
	// strict field validation, as kubectl does by default.
	typo := valid("typo")
	container := replica(typo, "Worker")["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	container["imagePullPolice"] = "Always"
	body, err = json.Marshal(typo)
	if err != nil {
		t.Fatal(err)
	}
	err = rest.Post().Namespace(ns).Resource("mpijobs").Param("fieldValidation", "Strict").Body(body).Do(ctx).Error()
	if err == nil || !strings.Contains(err.Error(), "imagePullPolice") {
		t.Errorf("typo in a pod template: error %v, want one naming imagePullPolice", err)
	}

	// The controller still serves good jobs.
	createJob(t, newJob(ns, "good", 1))
	waitForHosts(t, ns, "good", "good-worker-0:1")
	waitForRunning(t, ns, "good-launcher")
	waitForCondition(t, ns, "good", common.JobRunning, "MPIJobRunning")
}
