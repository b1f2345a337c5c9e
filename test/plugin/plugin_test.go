package plugin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/test/harness"
)

// submit starts an elastic job of small workers and waits until get shows
// all of them running and listed. The job and its pods are gone when the
// test ends, so that each test schedules onto empty nodes: a test that
// counts on where GPUs are free depends on no other test's pods.
func submit(t *testing.T, name string, workers, maxWorkers, gpus int, flags ...string) {
	t.Helper()
	t.Cleanup(func() { remove(t, name) })
	args := append([]string{"submit", name, "--image", "horovod/horovod:0.28.1",
		"--workers", fmt.Sprint(workers), "--min-workers", "1", "--max-workers", fmt.Sprint(maxWorkers),
		"--gpus", fmt.Sprint(gpus), "--cpu", "500m", "--memory", "1Gi", "--drain-seconds", "2"}, flags...)
	out := mustPlugin(t, append(args, "--", "python", "train.py")...)
	if want := fmt.Sprintf("mpijob.kubeflow.org/%s created\n", name); out != want {
		t.Fatalf("submit printed %q, want %q", out, want)
	}
	waitWorkers(t, name, workers, workers)
	// The workers are listed as they run, a moment before the status
	// says the job runs, which the tests read next.
	running := regexp.MustCompile(`(?m)^Status:\s+Running$`)
	err := poll.Retry(context.Background(), time.Minute, func() error {
		if r := plugin(t, "get", name); !running.MatchString(r.stdout) {
			return fmt.Errorf("get %s shows no Running status:\n%s", name, r)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// remove deletes a job, if it is still there, and waits until its pods
// are gone.
func remove(t *testing.T, name string) {
	t.Helper()
	if _, err := kubectl("delete", "mpijob", name, "--ignore-not-found"); err != nil {
		t.Error(err)
		return
	}
	err := poll.Retry(context.Background(), time.Minute, func() error {
		out, err := kubectl("get", "pods", "-l", api.LabelJobName+"="+name, "-o", "name")
		if err != nil {
			return err
		}
		if out != "" {
			return fmt.Errorf("pods of job %s remain: %s", name, strings.Fields(out))
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// waitWorkers waits until get reports running and listed workers.
func waitWorkers(t *testing.T, name string, running, listed int) {
	t.Helper()
	want := fmt.Sprintf("running %d, listed %d", running, listed)
	err := poll.Retry(context.Background(), time.Minute, func() error {
		r := plugin(t, "get", name)
		if !strings.Contains(r.stdout, want) {
			return fmt.Errorf("get %s shows no %q:\n%s", name, want, r)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// workerNames are the job's worker pods, through kubectl.
func workerNames(t *testing.T, name string) []string {
	t.Helper()
	out, err := kubectl("get", "pods", "-l", api.LabelJobName+"="+name+","+api.LabelRole+"=worker", "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range strings.Fields(out) {
		names = append(names, strings.TrimPrefix(l, "pod/"))
	}
	slices.Sort(names)
	return names
}

// hosts are the pods the job's discover_hosts.sh lists, through kubectl.
func hosts(t *testing.T, name string) []string {
	t.Helper()
	out, err := kubectl("get", "configmap", name+"-config", "-o", `jsonpath={.data.discover_hosts\.sh}`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for h := range elastic.ListedPods(out) {
		names = append(names, h)
	}
	slices.Sort(names)
	return names
}

func replicas(t *testing.T, name string) string {
	t.Helper()
	out, err := kubectl("get", "mpijob", name, "-o", "jsonpath={.spec.mpiReplicaSpecs.Worker.replicas}")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSubmit checks the dry run's job, the created job, list and get.
func TestSubmit(t *testing.T) {
	useAPI(t, harness.V1)
	testSubmit(t)
}

func testSubmit(t *testing.T) {
	r := plugin(t, "submit", "dry", "--image", "horovod/horovod:0.28.1", "--workers", "2", "--min-workers", "1",
		"--max-workers", "4", "--gpus", "2", "--dry-run=client", "-o", "yaml", "--", "python", "train.py")
	if r.code != 0 {
		t.Fatal(r)
	}
	var job struct {
		APIVersion string `json:"apiVersion"`
		Spec       struct {
			MPIReplicaSpecs map[string]struct {
				Template corev1.PodTemplateSpec `json:"template"`
			} `json:"mpiReplicaSpecs"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(r.stdout), &job); err != nil {
		t.Fatalf("the dry run's YAML: %v\n%s", err, r.stdout)
	}
	if want := "kubeflow.org/" + api.Version; job.APIVersion != want {
		t.Errorf("the dry run's apiVersion is %s, want %s", job.APIVersion, want)
	}
	wantCmd := []string{"horovodrun", "-np", "4", "--min-np", "2", "--max-np", "8",
		"--host-discovery-script", "/etc/mpi/discover_hosts.sh"}
	if api == harness.V2beta1 {
		// v2beta1's discovery script lists hosts without slots.
		wantCmd = append(wantCmd, "--slots-per-host", "2")
	}
	wantCmd = append(wantCmd, "--blacklist-cooldown-range", "10", "100", "python", "train.py")
	if diff := cmp.Diff(wantCmd, job.Spec.MPIReplicaSpecs["Launcher"].Template.Spec.Containers[0].Command); diff != "" {
		t.Errorf("launcher command (-want +got):\n%s", diff)
	}
	// v2beta1's workers run sshd: its launcher reaches them over SSH.
	worker := job.Spec.MPIReplicaSpecs["Worker"].Template.Spec.Containers[0]
	var wantWorker []string
	if api == harness.V2beta1 {
		wantWorker = []string{"/bin/sh", "-c", "mkdir -p /run/sshd && ssh-keygen -A && exec /usr/sbin/sshd -De -o StrictModes=no"}
	}
	if diff := cmp.Diff(wantWorker, append(worker.Command, worker.Args...)); diff != "" {
		t.Errorf("worker command (-want +got):\n%s", diff)
	}
	if _, err := kubectl("get", "mpijob", "dry"); err == nil {
		t.Error("a client dry run created the job")
	}
	// The dry run's output is a job the API server takes as it is.
	if _, err := kubectl("create", "--dry-run=server", "-f", writeTemp(t, r.stdout)); err != nil {
		t.Errorf("the API server refuses the dry run's job: %v", err)
	}

	submit(t, "sub", 2, 4, 1)
	list := mustPlugin(t, "list")
	if !regexp.MustCompile(`(?m)^sub\s+Running\s+2\s+2\s+2\s+\S+$`).MatchString(list) {
		t.Errorf("list has no running row for sub with 2 desired, running, listed:\n%s", list)
	}
	get := mustPlugin(t, "get", "sub", "-o", "wide")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^Status:\s+Running$`),
		regexp.MustCompile(`(?m)^Workers:\s+desired 2, running 2, listed 2 \(min 1, max 4\)$`),
		regexp.MustCompile(`(?m)^` + launcherPattern("sub") + `\s+launcher\s+Running\s+kwok-node-\d\s+no\s+-\s+0\s+0\s+\S+\s+10\.`),
		regexp.MustCompile(`(?m)^sub-worker-0\s+worker\s+Running\s+kwok-node-\d\s+yes\s+-\s+1\s+0\s+`),
		regexp.MustCompile(`(?m)^sub-worker-1\s+worker\s+Running\s+kwok-node-\d\s+yes\s+-\s+1\s+0\s+`),
	} {
		if !want.MatchString(get) {
			t.Errorf("get -o wide does not match %s:\n%s", want, get)
		}
	}
	var got unstructured.Unstructured
	if err := json.Unmarshal([]byte(mustPlugin(t, "get", "sub", "-o", "json")), &got.Object); err != nil ||
		got.GetName() != "sub" || got.GetAPIVersion() != "kubeflow.org/"+api.Version {
		t.Errorf("get -o json: %v, name %q, apiVersion %q", err, got.GetName(), got.GetAPIVersion())
	}
}

// launcherPattern matches the name of a job's launcher pod: under v2beta1
// the Job controller's, of a generated suffix.
func launcherPattern(job string) string {
	if api.LauncherJob {
		return regexp.QuoteMeta(job+"-launcher-") + `[a-z0-9]{5}`
	}
	return regexp.QuoteMeta(job + "-launcher")
}

// TestScaleOutAndIn grows a job by two, removes a named worker, then one
// by count.
func TestScaleOutAndIn(t *testing.T) {
	useAPI(t, harness.V1)
	testScaleOutAndIn(t)
}

func testScaleOutAndIn(t *testing.T) {
	submit(t, "grow", 2, 4, 1)
	out := mustPlugin(t, "scale-out", "grow", "--count", "2", "--timeout", "2m")
	want := "mpijob \"grow\" scaling out from 2 to 4 workers\n" +
		"mpijob \"grow\" scaled out to 4 workers: grow-worker-2, grow-worker-3 Running and listed\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("scale-out output (-want +got):\n%s", diff)
	}
	all := []string{"grow-worker-0", "grow-worker-1", "grow-worker-2", "grow-worker-3"}
	if diff := cmp.Diff(all, hosts(t, "grow")); diff != "" {
		t.Errorf("discover_hosts.sh after scale-out (-want +got):\n%s", diff)
	}

	out = mustPlugin(t, "scale-in", "grow", "--pod", "grow-worker-1", "--timeout", "2m")
	want = "mpijob \"grow\" scaling in from 4 to 3 workers\n" +
		"mpijob \"grow\" scaled in to 3 workers: grow-worker-1 left discover_hosts.sh and deleted\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("scale-in --pod output (-want +got):\n%s", diff)
	}
	left := []string{"grow-worker-0", "grow-worker-2", "grow-worker-3"}
	for what, got := range map[string][]string{"pods": workerNames(t, "grow"), "discover_hosts.sh": hosts(t, "grow")} {
		if diff := cmp.Diff(left, got); diff != "" {
			t.Errorf("%s after scale-in --pod (-want +got):\n%s", what, diff)
		}
	}

	// By count the operator picks the highest index among equal costs.
	out = mustPlugin(t, "scale-in", "grow", "--count", "1", "--timeout", "2m")
	if !strings.HasSuffix(out, "scaled in to 2 workers: grow-worker-3 left discover_hosts.sh and deleted\n") {
		t.Errorf("scale-in --count output:\n%s", out)
	}
	if diff := cmp.Diff([]string{"grow-worker-0", "grow-worker-2"}, workerNames(t, "grow")); diff != "" {
		t.Errorf("pods after scale-in --count (-want +got):\n%s", diff)
	}
	if got := replicas(t, "grow"); got != "2" {
		t.Errorf("replicas = %s, want 2", got)
	}
}

// TestScaleOutTimeoutRollsBack asks for workers of 6 GPUs on two nodes of
// 8: one new worker fits, the other stays Pending; the scale-out times out
// and the job goes back to its one worker.
func TestScaleOutTimeoutRollsBack(t *testing.T) {
	useAPI(t, harness.V1)
	testScaleOutTimeoutRollsBack(t)
}

func testScaleOutTimeoutRollsBack(t *testing.T) {
	submit(t, "big", 1, 3, 6)
	start := time.Now()
	r := plugin(t, "scale-out", "big", "--count", "2", "--timeout", "15s")
	took := time.Since(start)
	if r.code == 0 {
		t.Fatalf("a scale-out that cannot be scheduled succeeded: %s", r)
	}
	if took < 15*time.Second {
		t.Errorf("scale-out gave up after %s, before its timeout", took)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`^error: scale-out of mpijob "big" timed out after 15s: 1 of 2 new workers not Running and listed\n`),
		regexp.MustCompile(`\n  big-worker-[12]: FailedScheduling: 0/2 nodes are available: 2 Insufficient nvidia\.com/gpu\.`),
		regexp.MustCompile(`\nrolled back to 1 workers; leaving the job: big-worker-1, big-worker-2\n$`),
	} {
		if !want.MatchString(r.stderr) {
			t.Errorf("scale-out's error does not match %s:\n%s", want, r.stderr)
		}
	}
	if got := replicas(t, "big"); got != "1" {
		t.Errorf("replicas after the rollback = %s, want 1", got)
	}
	// The new workers leave; the first one stays, listed.
	err := poll.Retry(context.Background(), time.Minute, func() error {
		if got := workerNames(t, "big"); !slices.Equal(got, []string{"big-worker-0"}) {
			return fmt.Errorf("workers %v", got)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	if diff := cmp.Diff([]string{"big-worker-0"}, hosts(t, "big")); diff != "" {
		t.Errorf("discover_hosts.sh after the rollback (-want +got):\n%s", diff)
	}
}

// TestBadInput checks that refused commands say why, exit 1 and change
// nothing.
func TestBadInput(t *testing.T) {
	useAPI(t, harness.V1)
	testBadInput(t)
}

func testBadInput(t *testing.T) {
	submit(t, "bad", 2, 3, 0)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"get", "nope"}, `error: mpijob "nope" not found in namespace "plugin-e2e"`},
		{[]string{"scale-out", "nope", "--count", "1"}, `error: mpijob "nope" not found in namespace "plugin-e2e"`},
		{[]string{"scale-out", "bad", "--count", "2"}, `error: cannot scale out mpijob "bad" by 2: it has 2 workers and maxReplicas 3 (it can take 1 more)`},
		{[]string{"scale-in", "bad", "--count", "2"}, `error: cannot scale in mpijob "bad" by 2: it has 2 workers and minReplicas 1 (it can lose 1)`},
		{[]string{"scale-in", "bad", "--pod", "bad-launcher"}, `error: pod "bad-launcher" is not a worker of mpijob "bad" (its workers: bad-worker-0, bad-worker-1)`},
		{[]string{"logs", "bad", "--worker", "5"}, `error: mpijob "bad" has no worker of index 5 (its workers' indices: 0, 1)`},
		{[]string{"delete", "nope"}, `error: mpijob "nope" not found in namespace "plugin-e2e"`},
	}
	for _, tc := range cases {
		r := plugin(t, tc.args...)
		if r.code != 1 || strings.TrimSpace(r.stderr) != tc.want || r.stdout != "" {
			t.Errorf("kubectl mpijob %s: %s\nwant exit 1 and %q", strings.Join(tc.args, " "), r, tc.want)
		}
	}
	if got := replicas(t, "bad"); got != "2" {
		t.Errorf("replicas after refused commands = %s, want 2", got)
	}
}

// TestLogs reads the logs of a job's pods as kwok serves them: each
// container's log is a CRI log file of the test's, named by a kwok Logs
// object of the pod. It checks the whole log, a tail, the choice of pod and
// container, and -f, which prints lines written after it started until it
// is interrupted.
func TestLogs(t *testing.T) {
	useAPI(t, harness.V1)
	testLogs(t)
}

func testLogs(t *testing.T) {
	submit(t, "talk", 1, 1, 0)
	dir := t.TempDir()
	launcherLog := "mpirun: 2 ranks\nepoch 1 loss 0.52\nepoch 2 loss 0.31\nepoch 3 loss 0.17\n"
	launcherLogs := map[string]string{"mpi-launcher": launcherLog}
	if !api.LauncherJob {
		// v1's launcher has an init container.
		launcherLogs["kubectl-delivery"] = "kubectl copied to /opt/kube\n"
	}
	launcher := jobPod(t, "talk", "launcher").Name
	serveLogs(t, dir, launcher, launcherLogs)
	serveLogs(t, dir, "talk-worker-0", map[string]string{"mpi-worker": "worker 0: sshd listening\nworker 0: rank 1 up\n"})

	// kwok reads the Logs objects through an informer: wait for the first.
	err := poll.Retry(context.Background(), time.Minute, func() error {
		if r := plugin(t, "logs", "talk"); r.code != 0 || r.stdout != launcherLog {
			return fmt.Errorf("%s", r)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("logs talk never printed the launcher's log: %v", err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"logs", "talk", "--launcher"}, launcherLog},
		{[]string{"logs", "talk", "--tail", "2"}, "epoch 2 loss 0.31\nepoch 3 loss 0.17\n"},
		{[]string{"logs", "talk", "--worker", "0"}, "worker 0: sshd listening\nworker 0: rank 1 up\n"},
		{[]string{"logs", "talk", "--worker", "0", "--tail", "1"}, "worker 0: rank 1 up\n"},
	}
	if !api.LauncherJob {
		cases = append(cases, struct {
			args []string
			want string
		}{[]string{"logs", "talk", "-c", "kubectl-delivery"}, "kubectl copied to /opt/kube\n"})
	}
	for _, tc := range cases {
		err := poll.Retry(context.Background(), time.Minute, func() error {
			r := plugin(t, tc.args...)
			if r.code != 0 || r.stderr != "" {
				return fmt.Errorf("%s", r)
			}
			if diff := cmp.Diff(tc.want, r.stdout); diff != "" {
				return fmt.Errorf("stdout (-want +got):\n%s", diff)
			}
			return nil
		})
		if err != nil {
			t.Errorf("kubectl mpijob %s: %v", strings.Join(tc.args, " "), err)
		}
	}
	checkFollow(t, filepath.Join(dir, launcher+".mpi-launcher.log"), "epoch 3 loss 0.17\n")
}

// serveLogs writes each container's log to a CRI log file in dir and
// creates the kwok Logs object of pod that names them.
func serveLogs(t *testing.T, dir, pod string, logs map[string]string) {
	t.Helper()
	var entries []any
	for container, text := range logs {
		path := filepath.Join(dir, pod+"."+container+".log")
		if _, err := harness.AppendCRILog(path, "stdout", text); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, map[string]any{"containers": []string{container}, "logsFile": path})
	}
	obj, err := json.Marshal(map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1",
		"kind":       "Logs",
		"metadata":   map[string]any{"name": pod, "namespace": ns},
		"spec":       map[string]any{"logs": entries},
	})
	if err != nil {
		t.Fatal(err)
	}
	cmd := env.KubectlCmd(context.Background(), "create", "-f", "-")
	cmd.Stdin = bytes.NewReader(obj)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("creating the Logs of %s: %v\n%s", pod, err, out)
	}
	// Another test's pod may have the name.
	t.Cleanup(func() {
		if _, err := kubectl("delete", "logs.kwok.x-k8s.io", pod, "--ignore-not-found"); err != nil {
			t.Error(err)
		}
	})
}

// checkFollow runs logs -f --tail 1 on the launcher, which has logged
// before, and writes more lines to its log file while the command runs: the
// command prints the last earlier line (before), then the new lines, and
// exits 0 on SIGINT.
func checkFollow(t *testing.T, logFile, before string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := pluginCmd(ctx, "logs", "talk", "-f", "--tail", "1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			lines <- s.Text() + "\n"
		}
	}()
	var got strings.Builder
	// readUntil collects printed lines until they end with want.
	readUntil := func(want string) {
		t.Helper()
		for !strings.HasSuffix(got.String(), want) {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("logs -f ended before printing %q; printed %q, stderr %q", want, got.String(), stderr.String())
				}
				got.WriteString(l)
			case <-time.After(time.Minute):
				t.Fatalf("logs -f printed no %q within a minute; printed %q", want, got.String())
			}
		}
	}
	readUntil(before)
	more := "epoch 4 loss 0.09\nepoch 5 loss 0.05\n"
	if _, err := harness.AppendCRILog(logFile, "stdout", more); err != nil {
		t.Fatal(err)
	}
	readUntil(more)
	start := time.Now()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		got.WriteString(l)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("logs -f after SIGINT: %v, stderr %q", err, stderr.String())
	}
	t.Logf("$ kubectl mpijob logs talk -f --tail 1   # %q appended, then SIGINT; exited in %s\n%s",
		more, time.Since(start).Round(time.Millisecond), got.String())
	if diff := cmp.Diff(before+more, got.String()); diff != "" {
		t.Errorf("logs -f printed (-want +got):\n%s", diff)
	}
}

// TestWatchAndDelete follows a job with get --watch while it grows, then
// deletes it: the watch shows the new worker and ends with the deletion,
// and the job's pods go with it.
func TestWatchAndDelete(t *testing.T) {
	useAPI(t, harness.V1)
	testWatchAndDelete(t)
}

func testWatchAndDelete(t *testing.T) {
	submit(t, "seen", 1, 2, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	watched := make(chan result, 1)
	go func() { watched <- pluginCtx(t, ctx, "get", "seen", "--watch") }()
	time.Sleep(2 * time.Second)
	mustPlugin(t, "scale-out", "seen", "--count", "1", "--timeout", "1m")
	out := mustPlugin(t, "delete", "seen")
	if out != "mpijob.kubeflow.org \"seen\" deleted\n" {
		t.Errorf("delete printed %q", out)
	}
	r := <-watched
	if r.code != 0 {
		t.Fatalf("get --watch: %s", r)
	}
	for _, want := range []string{
		"Workers:     desired 1, running 1, listed 1 (min 1, max 2)",
		"Workers:     desired 2, running 2, listed 2 (min 1, max 2)",
		"\nmpijob \"seen\" deleted\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("get --watch printed no %q:\n%s", want, r.stdout)
		}
	}
	if _, err := kubectl("get", "mpijob", "seen"); err == nil {
		t.Error("the job is still there after delete")
	}
	err := poll.Retry(context.Background(), time.Minute, func() error {
		if got := workerNames(t, "seen"); len(got) > 0 {
			return fmt.Errorf("pods of the deleted job remain: %v", got)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

func writeTemp(t *testing.T, content string) string {
	t.Helper()
	path := t.TempDir() + "/job.yaml"
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestNoKubeconfig runs the plugin where kubectl's loading rules find no
// kubeconfig: it says so, where it looked and how to point at one, instead
// of failing to reach localhost:8080.
func TestNoKubeconfig(t *testing.T) {
	home := t.TempDir()
	cmd := exec.Command(env.plugin, "list")
	cmd.Env = append(harness.Environ("KUBECONFIG", "HOME", "KUBERNETES_MASTER", "KUBERNETES_SERVICE_HOST"), "HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("kubectl mpijob list without a kubeconfig: %v, want exit 1", err)
	}
	want := "error: no configuration has been provided: no kubeconfig names a cluster (looked in " + home + "/.kube/config).\n" +
		"Point kubectl mpijob at one as you would kubectl: --kubeconfig FILE, KUBECONFIG=FILE[:FILE...] in the environment, or --server URL\n"
	if stderr.String() != want || stdout.Len() > 0 {
		t.Errorf("stdout %q, stderr %q\nwant stderr %q", stdout.String(), stderr.String(), want)
	}
}

// TestVersionAndCompletion: version names the MPIJob versions the cluster
// serves, the one in use marked, and the shell completion of a job name
// lists the namespace's jobs.
func TestVersionAndCompletion(t *testing.T) {
	useAPI(t, harness.V1)
	// The v1 CRD serves v2beta1 too, read-only, for an upstream install's
	// jobs.
	testVersionAndCompletion(t, `kubeflow\.org/v1 \(used\), kubeflow\.org/v2beta1`)
}

// testVersionAndCompletion checks version, whose served versions must
// match served, and the completion of a job name.
func testVersionAndCompletion(t *testing.T, served string) {
	out := mustPlugin(t, "version")
	for _, want := range []*regexp.Regexp{
		// The commit is "unknown" where Go records no VCS information
		// (-buildvcs=false).
		regexp.MustCompile(`(?m)^Plugin version: \S+ \(commit \S+, go[0-9.]+, linux/\w+\)$`),
		regexp.MustCompile(`(?m)^Server version: v1\.\d+\.\d+$`),
		regexp.MustCompile(`(?m)^MPIJob APIs served: ` + served + `$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("version does not match %s:\n%s", want, out)
		}
	}
	t.Cleanup(func() { remove(t, "complete-me") })
	mustPlugin(t, "submit", "complete-me", "--image", "horovod/horovod:0.28.1", "--", "python", "train.py")
	r := plugin(t, "__complete", "get", "complete-")
	if r.code != 0 || r.stdout != "complete-me\n:4\n" {
		t.Errorf("completion of get complete-: %s", r)
	}
}

// TestSubmitPodOptions submits a job with each of submit's pod options and
// checks them on the pods the operator made and on the job: the variables,
// a PersistentVolumeClaim bound to a volume, a directory of the node and a
// ConfigMap mounted, the node selector, the toleration, the pull secret,
// the labels and annotations, and the launcher's resources.
func TestSubmitPodOptions(t *testing.T) {
	useAPI(t, harness.V1)
	testSubmitPodOptions(t)
}

func testSubmitPodOptions(t *testing.T) {
	objects := `apiVersion: v1
kind: ConfigMap
metadata: {name: train-settings}
data: {lr: "0.1"}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: plugin-e2e-train-data}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadOnlyMany]
  storageClassName: plugin-e2e
  hostPath: {path: /tmp/train-data}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: train-data}
spec:
  accessModes: [ReadOnlyMany]
  storageClassName: plugin-e2e
  resources: {requests: {storage: 1Gi}}
`
	if _, err := kubectl("apply", "-f", writeTemp(t, objects)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := kubectl("delete", "-f", writeTemp(t, objects), "--ignore-not-found"); err != nil {
			t.Error(err)
		}
	})
	submit(t, "opts", 1, 2, 0, "--env", "NCCL_DEBUG=INFO", "--env", "EPOCHS=3",
		"--volume", "pvc:train-data:/data:ro", "--volume", "hostpath:/mnt/cache:/cache", "--volume", "configmap:train-settings:/etc/settings",
		"--node-selector", "type=kwok", "--toleration", "dedicated=ml:NoSchedule", "--image-pull-secret", "registry",
		"--label", "team=vision", "--annotation", "owner=ana@example.com",
		"--launcher-cpu", "250m", "--launcher-memory", "256Mi")

	var job struct {
		Metadata struct{ Labels, Annotations map[string]string } `json:"metadata"`
	}
	getJSON(t, &job, "mpijob", "opts")
	if job.Metadata.Labels["team"] != "vision" || job.Metadata.Annotations["owner"] != "ana@example.com" {
		t.Errorf("the job's labels %v, annotations %v", job.Metadata.Labels, job.Metadata.Annotations)
	}
	want := podOptions{
		Env: []corev1.EnvVar{{Name: "NCCL_DEBUG", Value: "INFO"}, {Name: "EPOCHS", Value: "3"}},
		Volumes: map[string]corev1.VolumeSource{
			"/data":         {PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "train-data", ReadOnly: true}},
			"/cache":        {HostPath: &corev1.HostPathVolumeSource{Path: "/mnt/cache", Type: ptrTo(corev1.HostPathUnset)}},
			"/etc/settings": {ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "train-settings"}, DefaultMode: ptrTo[int32](0o644)}},
		},
		ReadOnly:     []string{"/data"},
		NodeSelector: map[string]string{"type": "kwok"},
		Toleration:   corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "ml", Effect: corev1.TaintEffectNoSchedule},
		PullSecrets:  []corev1.LocalObjectReference{{Name: "registry"}},
		Label:        "vision",
		Annotation:   "ana@example.com",
	}
	for _, role := range []string{"launcher", "worker"} {
		pod := jobPod(t, "opts", role)
		got := podOptionsOf(pod)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("the %s pod %s (-want +got):\n%s", role, pod.Name, diff)
		}
		if pod.Status.Phase != corev1.PodRunning {
			t.Errorf("the %s pod %s is %s", role, pod.Name, pod.Status.Phase)
		}
		if role == "launcher" {
			res := pod.Spec.Containers[0].Resources
			if cpu, mem := res.Requests.Cpu().String(), res.Limits.Memory().String(); cpu != "250m" || mem != "256Mi" {
				t.Errorf("the launcher's resources: %v", res)
			}
		}
	}
}

// podOptions are what TestSubmitPodOptions reads of a pod: the options
// amid what the operator and the API server add.
type podOptions struct {
	Env          []corev1.EnvVar
	Volumes      map[string]corev1.VolumeSource // by mount path
	ReadOnly     []string                       // mount paths
	NodeSelector map[string]string
	Toleration   corev1.Toleration // the one not the API server's
	PullSecrets  []corev1.LocalObjectReference
	Label        string // team
	Annotation   string // owner
}

func podOptionsOf(pod *corev1.Pod) podOptions {
	c := pod.Spec.Containers[0]
	o := podOptions{Volumes: map[string]corev1.VolumeSource{}, NodeSelector: pod.Spec.NodeSelector,
		PullSecrets: pod.Spec.ImagePullSecrets, Label: pod.Labels["team"], Annotation: pod.Annotations["owner"]}
	for _, e := range c.Env {
		if e.Name == "NCCL_DEBUG" || e.Name == "EPOCHS" {
			o.Env = append(o.Env, e)
		}
	}
	for _, m := range c.VolumeMounts {
		if !strings.HasPrefix(m.Name, "volume-") {
			continue
		}
		for _, v := range pod.Spec.Volumes {
			if v.Name == m.Name {
				o.Volumes[m.MountPath] = v.VolumeSource
			}
		}
		if m.ReadOnly {
			o.ReadOnly = append(o.ReadOnly, m.MountPath)
		}
	}
	for _, tol := range pod.Spec.Tolerations {
		if tol.Key == "dedicated" {
			o.Toleration = tol
		}
	}
	return o
}

// jobPod is the job's pod of the role, read with kubectl.
func jobPod(t *testing.T, name, role string) *corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	getJSON(t, &pods, "pods", "-l", api.LabelJobName+"="+name+","+api.LabelRole+"="+role)
	if len(pods.Items) == 0 {
		t.Fatalf("mpijob %s has no %s pod", name, role)
	}
	return &pods.Items[0]
}

// getJSON reads objects with kubectl -o json into v.
func getJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out, err := kubectl(append(append([]string{"get"}, args...), "-o", "json")...)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatal(err)
	}
}

func ptrTo[T any](v T) *T { return &v }
