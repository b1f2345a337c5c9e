package jobdefaults

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	common "github.com/kubeflow/common/pkg/apis/common/v1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
)

// sdkCopy is the copy of job-defaults.json that the Python SDK ships.
var sdkCopy = filepath.Join("..", "..", "sdk", "python", "mpijob", "job-defaults.json")

// TestSDKCopyIsEqual: the SDK reads the same defaults as the plugin; `make
// generate` copies the file over.
func TestSDKCopyIsEqual(t *testing.T) {
	got, err := os.ReadFile(sdkCopy)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, JSON()) {
		t.Errorf("%s differs from pkg/jobdefaults/job-defaults.json: run make generate", sdkCopy)
	}
}

// TestDefaultsAgreeWithTheOperator: where the operator defaults a field,
// the builders' default is the operator's, and the rest are values the API
// server admits.
func TestDefaultsAgreeWithTheOperator(t *testing.T) {
	d := Get()
	if d.ElasticPolicy.MinReplicas != kubeflow.DefaultMinReplicas {
		t.Errorf("minReplicas %d, the operator's default is %d", d.ElasticPolicy.MinReplicas, kubeflow.DefaultMinReplicas)
	}
	if d.ElasticPolicy.DrainSeconds != kubeflow.DefaultDrainSeconds {
		t.Errorf("drainSeconds %d, the operator's default is %d", d.ElasticPolicy.DrainSeconds, kubeflow.DefaultDrainSeconds)
	}
	policies := []common.CleanPodPolicy{common.CleanPodPolicyAll, common.CleanPodPolicyRunning, common.CleanPodPolicyNone}
	if !slices.Contains(policies, common.CleanPodPolicy(d.CleanPodPolicy)) {
		t.Errorf("cleanPodPolicy %q is none of %v", d.CleanPodPolicy, policies)
	}
	if c := d.Containers; c.Launcher == "" || c.Worker == "" || c.Launcher == c.Worker {
		t.Errorf("containers %+v: two names, different", c)
	}
	if r := d.Horovodrun.BlacklistCooldownRange; len(r) != 0 && (len(r) != 2 || r[0] < 1 || r[0] > r[1]) {
		t.Errorf("blacklistCooldownRange %v: none, or a lowest and a highest number of seconds", r)
	}
	if len(d.V2beta1Worker.Command) == 0 {
		t.Error("v2beta1Worker has no command")
	}
}

func TestParseRefusesUnknownKeys(t *testing.T) {
	if _, err := Parse([]byte(`{"cleanPodPolicy": "None", "restartPolicy": "Never"}`)); err == nil {
		t.Error("a key the builders do not read was accepted")
	}
}

func TestGetReturnsACopy(t *testing.T) {
	d := Get()
	d.Horovodrun.BlacklistCooldownRange[0] = -1
	d.V2beta1Worker.Args[0] = "changed"
	if again := Get(); again.Horovodrun.BlacklistCooldownRange[0] == -1 || again.V2beta1Worker.Args[0] == "changed" {
		t.Error("a change to Get's result reached the next call's")
	}
}
