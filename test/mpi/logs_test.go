package mpi

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// checkLogs makes kwok serve mpirun's output (out) as the launcher
// container's log, from a CRI log file in root, and checks it through
// kubectl logs and the pods/log API; workers, whose container only waits,
// log nothing: the cluster's ClusterLogs "default" serves them an empty
// file.
func checkLogs(ctx context.Context, t *testing.T, root, out string, workers []string) {
	launcher := job + "-launcher"
	logFile := root + "/launcher.log"
	at, err := harness.AppendCRILog(logFile, "stdout", out)
	if err != nil {
		t.Fatal(err)
	}
	createKwok(ctx, t, logsGVR, launcher, map[string]any{
		"logs": []any{map[string]any{"containers": []any{"launcher"}, "logsFile": logFile}},
	})
	want := strings.TrimRight(out, "\n")
	lines := strings.Split(want, "\n")
	harness.Eventually(t, poll, waitTimeout, "kubectl logs "+launcher+" to return mpirun's output", func() (bool, string) {
		got, err := kubectl(ctx, "logs", "-n", namespace, launcher, "-c", "launcher")
		return err == nil && got == want, fmt.Sprintf("%q %v", got, err)
	})

	checks := []struct {
		name string
		args []string
		want string
	}{
		{"tail", []string{"logs", "-n", namespace, launcher, "-c", "launcher", "--tail=1"}, lines[len(lines)-1]},
		{"timestamps", []string{"logs", "-n", namespace, launcher, "-c", "launcher", "--timestamps", "--tail=1"}, at + " " + lines[len(lines)-1]},
		{"label selector", []string{"logs", "-n", namespace, "-l", "mpi-job-role=launcher,mpi-job-name=" + job, "-c", "launcher"}, want},
	}
	for _, w := range workers {
		checks = append(checks, struct {
			name string
			args []string
			want string
		}{w, []string{"logs", "-n", namespace, w}, ""})
	}
	for _, c := range checks {
		if got, err := kubectl(ctx, c.args...); err != nil || got != c.want {
			t.Errorf("%s: kubectl %s = %q (%v), want %q", c.name, strings.Join(c.args, " "), got, err, c.want)
		}
	}
	tail := int64(2)
	raw, err := env.Kube.CoreV1().Pods(namespace).GetLogs(launcher, &corev1.PodLogOptions{Container: "launcher", TailLines: &tail}).DoRaw(ctx)
	if want := strings.Join(lines[len(lines)-2:], "\n") + "\n"; err != nil || string(raw) != want {
		t.Errorf("pods/log of %s with tailLines=2 = %q (%v), want %q", launcher, raw, err, want)
	}

	// The file grows as a running container's log does.
	if _, err := harness.AppendCRILog(logFile, "stderr", "one more line"); err != nil {
		t.Fatal(err)
	}
	if got, err := kubectl(ctx, "logs", "-n", namespace, launcher, "-c", "launcher", "--tail=1"); err != nil || got != "one more line" {
		t.Errorf("kubectl logs --tail=1 after a write = %q (%v), want %q", got, err, "one more line")
	}
}
