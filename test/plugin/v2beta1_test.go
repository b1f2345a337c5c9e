package plugin

import (
	"testing"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// TestV2beta1 runs the plugin's tests against the v2 operator: the cluster
// serves kubeflow.org/v2beta1 only, and the plugin, given no
// --api-version, finds it by discovery. The jobs' workers run sshd, their
// launcher is a batch Job's pod of a generated name, their pods carry
// v2beta1's labels and discover_hosts.sh names them by DNS name.
func TestV2beta1(t *testing.T) {
	useAPI(t, harness.V2beta1)
	for _, step := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"Submit", testSubmit},
		{"ScaleOutAndIn", testScaleOutAndIn},
		{"ScaleOutTimeoutRollsBack", testScaleOutTimeoutRollsBack},
		{"BadInput", testBadInput},
		{"Logs", testLogs},
		{"WatchAndDelete", testWatchAndDelete},
		{"SubmitPodOptions", testSubmitPodOptions},
		{"VersionAndCompletion", func(t *testing.T) { testVersionAndCompletion(t, `kubeflow\.org/v2beta1 \(used\)`) }},
	} {
		t.Run(step.name, step.run)
	}
}
