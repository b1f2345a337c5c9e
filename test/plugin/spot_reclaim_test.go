package plugin

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// reclaimTaint marks a node for termination in TestSpotReclaimExample.
const reclaimTaint = "example.com/reclaim"

// TestSpotReclaimExample runs examples/spot-reclaim/spot-reclaim.sh once
// after tainting the node of one of a job's two workers (each needs more
// than half a node's GPUs): that worker leaves the job by a named
// scale-in, the other stays.
func TestSpotReclaimExample(t *testing.T) {
	useAPI(t, harness.V1)
	submit(t, "spot", 2, 2, 5)
	node := nodeOf(t, "spot-worker-1")
	if other := nodeOf(t, "spot-worker-0"); other == node {
		t.Fatalf("both workers run on %s", node)
	}
	mustKubectl(t, "taint", "node", node, reclaimTaint+"=now:NoSchedule")
	t.Cleanup(func() { mustKubectl(t, "taint", "node", node, reclaimTaint+"-") })

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	script := filepath.Join(env.Root, "examples", "spot-reclaim", "spot-reclaim.sh")
	cmd := exec.CommandContext(ctx, script, "--once", "--namespace", ns, "--taint", reclaimTaint, "--timeout", "2m")
	// kubectl finds the plugin on PATH; the kubeconfig is the cluster's.
	path := filepath.Dir(env.plugin) + string(os.PathListSeparator) + filepath.Dir(env.Kubectl) +
		string(os.PathListSeparator) + os.Getenv("PATH")
	cmd.Env = append(harness.Environ("KUBECONFIG", "PATH"), "KUBECONFIG="+env.Kubeconfig, "PATH="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("spot-reclaim.sh: %v\n%s", err, out)
	}
	if want := `mpijob "spot" scaled in to 1 workers: spot-worker-1 left discover_hosts.sh and deleted`; !strings.Contains(string(out), want) {
		t.Errorf("spot-reclaim.sh printed no %q:\n%s", want, out)
	}
	if diff := cmp.Diff([]string{"spot-worker-0"}, workerNames(t, "spot")); diff != "" {
		t.Errorf("workers after the reclaim (-want +got):\n%s", diff)
	}
	if got := replicas(t, "spot"); got != "1" {
		t.Errorf("replicas = %s, want 1", got)
	}
}

// nodeOf is the node a pod runs on.
func nodeOf(t *testing.T, pod string) string {
	t.Helper()
	return mustKubectl(t, "get", "pod", pod, "-o", "jsonpath={.spec.nodeName}")
}

func mustKubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := kubectl(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
