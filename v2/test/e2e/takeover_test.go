package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow/mpi-operator/test/harness"
	"github.com/kubeflow/mpi-operator/test/upstream"
)

// The takeover of the jobs that upstream's own operator runs.
const (
	upstreamModule  = "github.com/kubeflow/mpi-operator"
	upstreamVersion = "v0.8.0"
	takeoverNS      = "takeover"
	// gangName is the --gang-scheduling value that turns on upstream's
	// scheduler-plugins PodGroups; its operator writes it as every pod's
	// schedulerName too.
	gangName = "scheduler-plugins"
	// upstreamHealthPort is where upstream's operator serves /healthz,
	// whatever its flags say.
	upstreamHealthPort = 8080
	// takeoverSettle is how long the children must stay as they are once
	// this operator shows each job as its own.
	takeoverSettle = 10 * time.Second
)

// The jobs upstream's operator starts, upstream.Workers (2) workers each.
const (
	tkPi        = "pi"         // upstream's examples/v2beta1/pi/pi.yaml
	tkAsWorker  = "as-worker"  // runLauncherAsWorker: true
	tkWaitReady = "wait-ready" // launcherCreationPolicy: WaitForWorkersReady
	tkSuspended = "suspended"  // created with runPolicy.suspend: true
)

var tkRunning = []string{tkPi, tkAsWorker, tkWaitReady}

// TestTakeover runs upstream v0.8.0's own operator, built from its module
// by hack/upstream-operator.sh, as upstream's deploy/v2beta1 install runs
// it, with gang scheduling through scheduler-plugins PodGroups, and lets
// it start four jobs; then it stops it, applies this project's overlay
// over upstream's install as v2/README.md's upgrade says, and starts this
// operator with the same arguments. No child of upstream's may be
// replaced; the jobs must then be this operator's to run: a deleted
// worker comes back, a job suspends and resumes, the job created suspended
// resumes with upstream's launcher Job, and jobs scale. On the way, the
// Parity step creates the same jobs afresh under this operator and
// compares every child with upstream's (parity_test.go).
//
// There is no scheduler-plugins scheduler here: upstream's operator names
// the gang scheduler as the pods' schedulerName, so the test runs a second
// kube-scheduler whose only profile has that name. It places pods one by
// one, as the coscheduling plugin would once a gang is complete; what is
// checked is the operators' side of gang scheduling (PodGroups, the pods'
// scheduler and group label), not the gang's admission.
func TestTakeover(t *testing.T) {
	tk := &takeover{}
	t.Cleanup(func() { tk.cleanup(t) })
	steps := []struct {
		name string
		run  func(*testing.T)
	}{
		{"InstallUpstream", tk.installUpstream},
		{"GangScheduler", tk.startGangScheduler},
		{"StartUpstream", tk.startUpstream},
		{"UpstreamJobs", tk.upstreamJobs},
		{"Handover", tk.handover},
		{"Adopted", tk.adopted},
		{"Parity", tk.parity},
		{"WorkerRecreated", tk.workerRecreated},
		{"SuspendResume", tk.suspendResume},
		{"ResumeUpstreamSuspended", tk.resumeUpstreamSuspended},
		{"ScaleFixed", tk.scaleFixed},
		{"ScaleElastic", tk.scaleElastic},
		{"Stop", func(t *testing.T) { stopOperator(t, tk.ours, 5*time.Second) }},
	}
	start := time.Now()
	for _, step := range steps {
		if !t.Run(step.name, step.run) {
			t.Fatalf("step %s failed; the steps after it are skipped", step.name)
		}
	}
	t.Logf("the takeover took %s in all", time.Since(start).Round(time.Second))
}

type takeover struct {
	module    string // upstream's module directory
	upstream  *harness.Operator
	ours      *harness.Operator
	scheduler *harness.Operator
	// before are the objects of takeoverNS as upstream's operator left
	// them; conditions are the jobs' conditions then, as JSON.
	before     objects
	conditions map[string]string
	// upstreamSnapshot is what upstream's operator made of the jobs,
	// normalised for the comparison of the Parity step.
	upstreamSnapshot snapshot
}

func (tk *takeover) cleanup(t *testing.T) {
	for _, p := range []*harness.Operator{tk.upstream, tk.ours, tk.scheduler} {
		if p != nil && p.Alive() {
			if t.Failed() {
				t.Logf("last lines of %s:\n%s", p.LogPath, harness.Tail(p.LogPath, 40))
			}
			p.Terminate(10 * time.Second)
		}
	}
	running = nil
	if _, err := kubectl("delete", "namespace", takeoverNS, parityNS, "--ignore-not-found", "--wait=false"); err != nil {
		t.Log(err)
	}
}

// installUpstream installs upstream's deploy/v2beta1 manifest from its
// module, as upstream's README does (a server-side apply), and the
// PodGroup CRD of the scheduler-plugins version upstream builds with, from
// that module.
func (tk *takeover) installUpstream(t *testing.T) {
	clearCluster(t)
	tk.module = moduleDir(t, upstreamModule, upstreamVersion)
	manifest := filepath.Join(tk.module, "deploy", "v2beta1", "mpi-operator.yaml")
	t.Logf("kubectl apply --server-side -f %s:\n%s", manifest, must(t, "apply", "--server-side", "-f", manifest))
	waitCRD(t)
	// The Deployment's image cannot run here; the binary runs as a process.
	must(t, "scale", "deployment/mpi-operator", "-n", "mpi-operator", "--replicas=0")

	plugins := moduleDir(t, "sigs.k8s.io/scheduler-plugins", requiredVersion(t, tk.module, "sigs.k8s.io/scheduler-plugins"))
	must(t, "apply", "--server-side", "-f", filepath.Join(plugins, "config", "crd", "bases", "scheduling.x-k8s.io_podgroups.yaml"))
	harness.Eventually(t, poll, time.Minute, "the API server to serve podgroups.scheduling.x-k8s.io", func() (bool, string) {
		_, err := kubectl("get", "podgroups.scheduling.x-k8s.io", "-A")
		return err == nil, fmt.Sprint(err)
	})
	waitNamespace(t, takeoverNS)
}

// startGangScheduler runs a kube-scheduler of the control plane's build
// whose one profile is named gangName, so that the pods both operators
// give that schedulerName are placed on the kwok nodes.
func (tk *takeover) startGangScheduler(t *testing.T) {
	ports, err := harness.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(suite.Dir, "gang-scheduler")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(suite.Dir, "kubeconfigs", "kube-scheduler")
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
leaderElection:
  leaderElect: false
profiles:
- schedulerName: %s
`, kubeconfig, gangName)), 0o644); err != nil {
		t.Fatal(err)
	}
	tk.scheduler, err = harness.StartOperator(context.Background(), harness.OperatorConfig{
		Bin:     filepath.Join(filepath.Dir(suite.Kubectl), "kube-scheduler"),
		LogPath: filepath.Join(suite.Dir, "gang-scheduler.log"),
		Args: []string{"--config=" + config, "--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
			"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", ports[0]), "--cert-dir=" + dir, "--v=1"},
		ExactArgs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", ports[0])
	harness.Eventually(t, poll, time.Minute, "the "+gangName+" scheduler to answer /healthz", func() (bool, string) {
		if !tk.scheduler.Alive() {
			t.Fatalf("the scheduler exited: %s\n%s", tk.scheduler.Status(), harness.Tail(tk.scheduler.LogPath, 20))
		}
		code, body, err := harness.Scrape(context.Background(), url, "")
		return err == nil && code == http.StatusOK && body == "ok", fmt.Sprintf("%d %q %v", code, body, err)
	})
}

// upstreamPortClaimed: the process claims upstream's fixed port once.
var upstreamPortClaimed bool

// startUpstream runs upstream's binary with its Deployment's arguments and
// --gang-scheduling, as its ServiceAccount, and waits until it leads.
func (tk *takeover) startUpstream(t *testing.T) {
	bin := filepath.Join(buildUpstreamOperator(t), "bin", "mpi-operator")
	if !upstreamPortClaimed {
		// Upstream's /healthz listens on every address at a fixed port: one
		// such process at a time on this machine.
		harness.Eventually(t, poll, 2*time.Minute, fmt.Sprintf("port %d to be free", upstreamHealthPort), func() (bool, string) {
			err := harness.ClaimPort(upstreamHealthPort)
			return err == nil, fmt.Sprint(err)
		})
		upstreamPortClaimed = true
	}
	args := append(containerArgs(t, "mpi-operator"), "--gang-scheduling="+gangName)
	var err error
	tk.upstream, err = harness.StartOperator(context.Background(), harness.OperatorConfig{
		Bin: bin, Kubeconfig: serviceAccountKubeconfig(t, "mpi-operator"), LogPath: filepath.Join(suite.Dir, "upstream-operator.log"),
		Args: args, ExactArgs: true, Dir: suite.Dir,
	})
	if err != nil {
		t.Fatal(err)
	}
	running = tk.upstream
	t.Logf("upstream's operator started: %s %s (pid %d, log %s)", bin, strings.Join(args, " "), tk.upstream.PID, tk.upstream.LogPath)
	harness.Eventually(t, poll, time.Minute, "upstream's operator to answer /healthz and lead", func() (bool, string) {
		code, body, err := harness.Scrape(context.Background(), fmt.Sprintf("http://127.0.0.1:%d/healthz", upstreamHealthPort), "")
		if err != nil || code != http.StatusOK {
			return false, fmt.Sprintf("/healthz %d %q %v", code, body, err)
		}
		holder, err := kubectl("get", "lease", "mpi-operator", "-n", "mpi-operator", "-o", "jsonpath={.spec.holderIdentity}")
		return err == nil && strings.TrimSpace(holder) != "", fmt.Sprintf("lease holder %q %v", holder, err)
	})
}

// upstreamJobs creates the jobs and waits until upstream's operator has
// made every child and the pods run, then records every object of the
// namespace.
func (tk *takeover) upstreamJobs(t *testing.T) {
	createTakeoverJobs(t, tk.module, takeoverNS)
	waitTakeoverJobs(t, takeoverNS, "upstream's operator")
	// Upstream's operator makes the children of a job created suspended,
	// its launcher Job suspended; this one does not (v2/README.md).
	waitJobState(t, tkSuspended, "upstream's operator to make the children of "+tkSuspended, func(_ *job, objs objects) string {
		return objs.suspendedChildren(tkSuspended)
	})
	tk.before = inventory(t)
	tk.upstreamSnapshot = takeSnapshot(t, takeoverNS)
	tk.conditions = jobConditions(t)
	for _, name := range append(tkRunning, tkSuspended) {
		j, err := getJob(takeoverNS, name)
		if err != nil {
			t.Fatal(err)
		}
		if sel := j.Status.ReplicaStatuses["Worker"].Selector; sel != "" {
			t.Errorf("upstream's operator wrote the Worker selector %q of %s; the test reads it as this operator's mark", sel, name)
		}
	}
	for _, name := range tkRunning {
		pg := tk.before.get("PodGroup", name)
		t.Logf("upstream's PodGroup %s: labels %v, minMember %d", name, pg.Metadata.Labels, pg.Spec.MinMember)
	}
	checkIndexLabels(t, tk.before, 2)
	t.Logf("upstream's operator left %d objects in %s: %s", len(tk.before), takeoverNS, strings.Join(slices.Sorted(maps.Keys(tk.before)), " "))
}

// handover stops upstream's operator, applies the overlay over its install
// and starts this operator with the Deployment's arguments and the same
// gang scheduler.
func (tk *takeover) handover(t *testing.T) {
	code, took := tk.upstream.Terminate(10 * time.Second)
	running = nil
	stopped := time.Now()
	t.Logf("upstream's operator exited with code %d %s after SIGTERM", code, took.Round(time.Millisecond))

	t.Logf("kubectl apply -k v2/manifests/overlays/standalone:\n%s", must(t, "apply", "-k", "v2/manifests/overlays/standalone"))
	waitCRD(t)
	must(t, "scale", "deployment/mpi-operator", "-n", "mpi-operator", "--replicas=0")
	args := append(installArgs(t, "mpi-operator"), "--gang-scheduling="+gangName)
	tk.ours = startOperatorProcess(t, "takeover.log", serviceAccountKubeconfig(t, "mpi-operator"), args...)
	// Upstream's operator does not give its Lease up: this one leads once
	// the Lease expires.
	waitLeader(t)
	t.Logf("this operator leads %s after upstream's stopped", time.Since(stopped).Round(100*time.Millisecond))
}

// adopted waits until this operator shows every job as its own, lets it
// settle, and checks that no object of upstream's was replaced or deleted
// and none added; the PodGroups carry the job's label now.
func (tk *takeover) adopted(t *testing.T) {
	start := time.Now()
	for _, name := range tkRunning {
		waitJobState(t, name, "this operator to take "+name+" over", func(j *job, objs objects) string {
			if w := j.Status.ReplicaStatuses["Worker"]; j.is["Running"] != "True" || w.Selector == "" || w.Active != 2 {
				return fmt.Sprintf("Worker %+v", w)
			}
			if pg := objs.get("PodGroup", name); pg == nil || pg.Metadata.Labels["app"] != name {
				return "PodGroup not labelled app=" + name
			}
			return ""
		})
	}
	waitJobState(t, tkSuspended, "this operator to take "+tkSuspended+" over", func(j *job, _ objects) string {
		if w := j.Status.ReplicaStatuses["Worker"]; j.is["Suspended"] != "True" || w.Selector == "" {
			return fmt.Sprintf("Worker %+v", w)
		}
		return ""
	})
	t.Logf("every job is this operator's %s after it leads; settling for %s", time.Since(start).Round(10*time.Millisecond), takeoverSettle)
	time.Sleep(takeoverSettle)

	after := inventory(t)
	if diff := changed(tk.before.uids(), after.uids()); diff != "" {
		t.Errorf("objects replaced, deleted or added by the takeover: %s", diff)
	}
	var updated []string
	for key, o := range after {
		if b, ok := tk.before[key]; ok && b.Metadata.ResourceVersion != o.Metadata.ResourceVersion {
			updated = append(updated, key)
		}
	}
	slices.Sort(updated)
	t.Logf("%d objects compared by UID, none replaced; %d updated in place: %s", len(after), len(updated), strings.Join(updated, " "))

	for _, name := range tkRunning {
		pg, was := after.get("PodGroup", name), tk.before.get("PodGroup", name)
		if metav1.GetControllerOfNoCopy(&pg.Metadata) == nil || metav1.GetControllerOfNoCopy(&pg.Metadata).Name != name {
			t.Errorf("PodGroup %s lost its controller: %+v", name, pg.Metadata.OwnerReferences)
		}
		t.Logf("PodGroup %s: labels %v, minMember %d (upstream's %d)", name, pg.Metadata.Labels, pg.Spec.MinMember, was.Spec.MinMember)
	}
	// The jobs go on as they were: no condition is rewritten (nor
	// announced again).
	for name, was := range jobConditions(t) {
		if was != tk.conditions[name] {
			t.Errorf("the conditions of %s changed with the takeover:\n%s\nupstream's:\n%s", name, was, tk.conditions[name])
		}
	}
	checkIndexLabels(t, after, 2)
	checkHostfile(t, 2)
	hosts := waitDiscovery(t, settle, settle, takeoverNS, tkPi, 2)
	t.Logf("discover_hosts.sh of %s: %v", tkPi, hosts)
}

// workerRecreated deletes a worker of the job whose launcher is a worker:
// it comes back under its name, with upstream's labels and the gang's
// scheduler, and nothing else changes.
func (tk *takeover) workerRecreated(t *testing.T) {
	before := inventory(t)
	victim := tkAsWorker + "-worker-0"
	old := before.get("Pod", victim)
	// Not waiting for the pod to go: kubectl's wait, which follows the
	// name, can miss the deletion when the pod of that name is back
	// within a few milliseconds.
	must(t, "delete", "pod", victim, "-n", takeoverNS, "--wait=false")
	deleted := time.Now()
	waitJobState(t, tkAsWorker, victim+" to be recreated and run", func(_ *job, objs objects) string {
		p := objs.get("Pod", victim)
		if p == nil || p.Metadata.UID == old.Metadata.UID {
			return "not recreated"
		}
		return objs.runningChildren(tkAsWorker, 2)
	})
	t.Logf("%s ran again %s after its deletion", victim, time.Since(deleted).Round(10*time.Millisecond))
	after := inventory(t)
	checkIndexLabels(t, after, 2)
	samePod(t, old, after.get("Pod", victim))
	delete(before, "Pod/"+victim)
	delete(after, "Pod/"+victim)
	if diff := changed(before.uids(), after.uids()); diff != "" {
		t.Errorf("objects replaced besides %s: %s", victim, diff)
	}
}

// suspendResume suspends and resumes a job upstream's operator started:
// its pods and PodGroup go and its launcher Job is suspended; resumed,
// the same launcher Job runs again beside new workers and a new PodGroup.
func (tk *takeover) suspendResume(t *testing.T) {
	before := inventory(t)
	patchSuspend(t, tkPi, true)
	waitJobState(t, tkPi, tkPi+" to be Suspended with no pod nor PodGroup", func(j *job, objs objects) string {
		if j.is["Suspended"] != "True" || j.is["Running"] != "False" {
			return "not suspended"
		}
		if pods := objs.podsOf(tkPi); len(pods) > 0 {
			return "pods left: " + strings.Join(pods, " ")
		}
		if objs.get("PodGroup", tkPi) != nil {
			return "PodGroup left"
		}
		if lj := objs.get("Job", tkPi+"-launcher"); lj == nil || !ptrTrue(lj.Spec.Suspend) {
			return "launcher Job not suspended"
		}
		return ""
	})
	patchSuspend(t, tkPi, false)
	waitJobState(t, tkPi, tkPi+" to run again", func(j *job, objs objects) string {
		if j.is["Running"] != "True" || j.is["Suspended"] != "False" {
			return "not resumed"
		}
		return objs.runningChildren(tkPi, 2)
	})
	after := inventory(t)
	for i := range 2 {
		name := fmt.Sprintf("%s-worker-%d", tkPi, i)
		samePod(t, before.get("Pod", name), after.get("Pod", name))
	}
	for _, key := range []string{"Job/" + tkPi + "-launcher", "Service/" + tkPi, "Secret/" + tkPi + "-ssh", "ConfigMap/" + tkPi + "-config"} {
		if before[key] == nil || after[key] == nil || before[key].Metadata.UID != after[key].Metadata.UID {
			t.Errorf("%s was replaced by the suspension", key)
		}
	}
	if pg := after.get("PodGroup", tkPi); pg.Metadata.Labels["app"] != tkPi {
		t.Errorf("the new PodGroup %s has labels %v", tkPi, pg.Metadata.Labels)
	}
}

// resumeUpstreamSuspended resumes the job that upstream's operator created
// suspended: its launcher Job, upstream's, runs, beside this operator's
// workers and PodGroup.
func (tk *takeover) resumeUpstreamSuspended(t *testing.T) {
	patchSuspend(t, tkSuspended, false)
	waitJobState(t, tkSuspended, tkSuspended+" to run", func(j *job, objs objects) string {
		if j.is["Running"] != "True" {
			return "not Running"
		}
		return objs.runningChildren(tkSuspended, 2)
	})
	after := inventory(t)
	for _, key := range []string{"Job/" + tkSuspended + "-launcher", "Service/" + tkSuspended, "Secret/" + tkSuspended + "-ssh", "ConfigMap/" + tkSuspended + "-config"} {
		if after[key] == nil || after[key].Metadata.UID != tk.before[key].Metadata.UID {
			t.Errorf("%s, made by upstream's operator, was replaced", key)
		}
	}
}

// scaleFixed scales the job whose launcher is a worker, which has no
// elasticPolicy, to 3 workers: the new worker is labelled as upstream
// labels them (its index plus one), and the hostfile names the launcher
// first.
func (tk *takeover) scaleFixed(t *testing.T) {
	must(t, "scale", "mpijob/"+tkAsWorker, "-n", takeoverNS, "--replicas=3")
	waitJobState(t, tkAsWorker, tkAsWorker+" to run 3 workers", func(_ *job, objs objects) string {
		return objs.runningChildren(tkAsWorker, 3)
	})
	after := inventory(t)
	checkIndexLabels(t, after, 3)
	checkHostfile(t, 3)
	if pg := after.get("PodGroup", tkAsWorker); pg.Spec.MinMember != 4 {
		t.Errorf("PodGroup %s: minMember %d after the scale to 3, want 4", tkAsWorker, pg.Spec.MinMember)
	}
}

// scaleElastic makes upstream's example elastic, which upstream's schema
// had no field for, and scales it out and in.
func (tk *takeover) scaleElastic(t *testing.T) {
	must(t, "patch", "mpijob", tkPi, "-n", takeoverNS, "--type=merge",
		"-p", `{"spec":{"elasticPolicy":{"minReplicas":1,"maxReplicas":4,"drainSeconds":2}}}`)
	before := inventory(t)
	must(t, "scale", "mpijob/"+tkPi, "-n", takeoverNS, "--replicas=3")
	waitDiscovery(t, settle, settle, takeoverNS, tkPi, 3)
	must(t, "scale", "mpijob/"+tkPi, "-n", takeoverNS, "--replicas=1")
	hosts := waitDiscovery(t, scriptFollows, 2*time.Second+settle, takeoverNS, tkPi, 1)
	if want := fmt.Sprintf("%s-worker-0.%s.%s.svc", tkPi, tkPi, takeoverNS); len(hosts) != 1 || hosts[0] != want {
		t.Errorf("after the scale to 1, discover_hosts.sh lists %v, want [%s]", hosts, want)
	}
	after := inventory(t)
	if a, b := after.get("Pod", tkPi+"-worker-0"), before.get("Pod", tkPi+"-worker-0"); a == nil || a.Metadata.UID != b.Metadata.UID {
		t.Errorf("%s-worker-0 was replaced by the scales", tkPi)
	}
	if pg := after.get("PodGroup", tkPi); pg.Spec.MinMember != 2 {
		t.Errorf("PodGroup %s: minMember %d once elastic with minReplicas 1, want 2", tkPi, pg.Spec.MinMember)
	}
}

// createTakeoverJobs creates the jobs of the takeover in ns: upstream's
// pi example from its module dir, and the others of takeoverJob.
func createTakeoverJobs(t *testing.T, module, ns string) {
	t.Helper()
	must(t, "create", "--validate=strict", "-n", ns, "-f", filepath.Join(module, "examples", "v2beta1", "pi", "pi.yaml"))
	createYAML(t, takeoverJob(ns, tkAsWorker, "  runLauncherAsWorker: true\n"))
	createYAML(t, takeoverJob(ns, tkWaitReady, "  launcherCreationPolicy: WaitForWorkersReady\n"))
	createYAML(t, takeoverJob(ns, tkSuspended, "  runPolicy:\n    suspend: true\n"))
}

// waitTakeoverJobs waits until the operator (who, for messages) runs the
// jobs of createTakeoverJobs in ns with every child, and holds the
// suspended one suspended with no pod nor PodGroup.
func waitTakeoverJobs(t *testing.T, ns, who string) {
	t.Helper()
	for _, name := range tkRunning {
		waitJobStateIn(t, ns, name, who+" to run "+name, func(j *job, objs objects) string {
			if j.is["Running"] != "True" {
				return "not Running"
			}
			return objs.runningChildren(name, 2)
		})
	}
	waitJobStateIn(t, ns, tkSuspended, who+" to hold "+tkSuspended+" suspended", func(j *job, objs objects) string {
		if j.is["Suspended"] != "True" {
			return "not Suspended"
		}
		if pods := objs.podsOf(tkSuspended); len(pods) > 0 || objs.get("PodGroup", tkSuspended) != nil {
			return fmt.Sprintf("pods %v or a PodGroup", pods)
		}
		return ""
	})
}

// jobConditions are the conditions of the jobs, as JSON, by job.
func jobConditions(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range append(tkRunning, tkSuspended) {
		out[name] = must(t, "get", "mpijob", name, "-n", takeoverNS, "-o", "jsonpath={.status.conditions}")
	}
	return out
}

// takeoverJob is a job of two workers of upstream's pi image in ns; spec
// holds more lines of its spec.
func takeoverJob(ns, name, spec string) string {
	return upstream.JobManifest("kubeflow.org/v2beta1", ns, name, upstream.V2Image,
		"  sshAuthMountPath: /home/mpiuser/.ssh\n"+spec)
}

func patchSuspend(t *testing.T, name string, suspend bool) {
	t.Helper()
	must(t, "patch", "mpijob", name, "-n", takeoverNS, "--type=merge",
		"-p", fmt.Sprintf(`{"spec":{"runPolicy":{"suspend":%t}}}`, suspend))
}

func ptrTrue(b *bool) bool { return b != nil && *b }

// waitJobState waits until check, given the job and the objects of
// takeoverNS, reports nothing missing ("").
func waitJobState(t *testing.T, name, what string, check func(*job, objects) string) {
	t.Helper()
	waitJobStateIn(t, takeoverNS, name, what, check)
}

// waitJobStateIn is waitJobState for a job of ns.
func waitJobStateIn(t *testing.T, ns, name, what string, check func(*job, objects) string) {
	t.Helper()
	harness.Eventually(t, poll, settle, what, func() (bool, string) {
		j, err := getJob(ns, name)
		if err != nil {
			return false, err.Error()
		}
		objs, err := listObjectsIn(ns)
		if err != nil {
			return false, err.Error()
		}
		missing := check(j, objs)
		return missing == "", j.seen + "; " + missing
	})
}

// object is what the test reads of any object of the namespace.
type object struct {
	Kind     string            `json:"kind"`
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		// PodGroup
		MinMember int32 `json:"minMember"`
		// Pod
		NodeName      string `json:"nodeName"`
		SchedulerName string `json:"schedulerName"`
		// Job
		Suspend *bool `json:"suspend"`
	} `json:"spec"`
	Status struct {
		Phase corev1.PodPhase `json:"phase"`
	} `json:"status"`
	raw json.RawMessage
}

// objects are the namespace's objects by "<kind>/<name>".
type objects map[string]*object

// takeoverKinds are the kinds of objects an MPIJob's operator makes,
// directly or through the launcher Job.
const takeoverKinds = "services,secrets,configmaps,jobs.batch,pods,podgroups.scheduling.x-k8s.io"

func listObjects() (objects, error) { return listObjectsIn(takeoverNS) }

// listObjectsIn lists the objects of takeoverKinds in ns.
func listObjectsIn(ns string) (objects, error) {
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	out, err := kubectl("get", takeoverKinds, "-n", ns, "-o", "json")
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, err
	}
	objs := objects{}
	for _, raw := range list.Items {
		o := &object{raw: raw}
		if err := json.Unmarshal(raw, o); err != nil {
			return nil, err
		}
		objs[o.Kind+"/"+o.Metadata.Name] = o
	}
	return objs, nil
}

func inventory(t *testing.T) objects {
	t.Helper()
	objs, err := listObjects()
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func (objs objects) get(kind, name string) *object { return objs[kind+"/"+name] }

func (objs objects) uids() map[string]string {
	out := map[string]string{}
	for key, o := range objs {
		out[key] = string(o.Metadata.UID)
	}
	return out
}

// podsOf names the job's pods, launcher and workers.
func (objs objects) podsOf(name string) []string {
	var out []string
	for key, o := range objs {
		if o.Kind == "Pod" && o.Metadata.Labels["training.kubeflow.org/job-name"] == name {
			out = append(out, key)
		}
	}
	slices.Sort(out)
	return out
}

// runningChildren says what a running job of the given workers lacks: its
// Service, Secret, ConfigMap, launcher Job, PodGroup, workers and launcher
// pod, each pod Running on a node the gang's scheduler chose.
func (objs objects) runningChildren(name string, workers int) string {
	var missing []string
	for _, key := range []string{"Service/" + name, "Secret/" + name + "-ssh", "ConfigMap/" + name + "-config", "Job/" + name + "-launcher", "PodGroup/" + name} {
		if objs[key] == nil {
			missing = append(missing, key)
		}
	}
	pods := objs.podsOf(name)
	if len(pods) != workers+1 {
		missing = append(missing, fmt.Sprintf("%d pods (%v), want %d", len(pods), pods, workers+1))
	}
	for i := range workers {
		if objs.get("Pod", fmt.Sprintf("%s-worker-%d", name, i)) == nil {
			missing = append(missing, fmt.Sprintf("worker %d", i))
		}
	}
	for _, key := range pods {
		p := objs[key]
		if p.Status.Phase != corev1.PodRunning || p.Metadata.DeletionTimestamp != nil || p.Spec.NodeName == "" {
			missing = append(missing, key+" Running")
		}
		if p.Spec.SchedulerName != gangName || p.Metadata.Labels["scheduling.x-k8s.io/pod-group"] != name {
			missing = append(missing, fmt.Sprintf("%s of the gang (scheduler %q, labels %v)", key, p.Spec.SchedulerName, p.Metadata.Labels))
		}
	}
	return strings.Join(missing, ", ")
}

// suspendedChildren says what a suspended job lacks, or has too much of:
// its Service, Secret, ConfigMap and suspended launcher Job, and no pod or
// PodGroup.
func (objs objects) suspendedChildren(name string) string {
	var missing []string
	for _, key := range []string{"Service/" + name, "Secret/" + name + "-ssh", "ConfigMap/" + name + "-config"} {
		if objs[key] == nil {
			missing = append(missing, key)
		}
	}
	if lj := objs.get("Job", name+"-launcher"); lj == nil || !ptrTrue(lj.Spec.Suspend) {
		missing = append(missing, "a suspended launcher Job")
	}
	if pods := objs.podsOf(name); len(pods) > 0 {
		missing = append(missing, fmt.Sprintf("no pods (%v)", pods))
	}
	if objs.get("PodGroup", name) != nil {
		missing = append(missing, "no PodGroup")
	}
	return strings.Join(missing, ", ")
}

// checkIndexLabels checks the replica-index labels of the job whose
// launcher is a worker, as upstream writes them: the launcher 0, worker i
// i+1.
func checkIndexLabels(t *testing.T, objs objects, workers int) {
	t.Helper()
	seen := map[string]string{}
	for _, key := range objs.podsOf(tkAsWorker) {
		p := objs[key]
		id := p.Metadata.Name
		if p.Metadata.Labels["training.kubeflow.org/job-role"] == "launcher" {
			id = "launcher"
		}
		seen[id] = p.Metadata.Labels["training.kubeflow.org/replica-index"]
	}
	want := map[string]string{"launcher": "0"}
	for i := range workers {
		want[fmt.Sprintf("%s-worker-%d", tkAsWorker, i)] = fmt.Sprint(i + 1)
	}
	if !maps.Equal(seen, want) {
		t.Errorf("replica-index labels of %s: %v, want %v", tkAsWorker, seen, want)
	}
}

// checkHostfile checks the hostfile of the job whose launcher is a worker:
// the launcher first, then the workers, one slot each.
func checkHostfile(t *testing.T, workers int) {
	t.Helper()
	name := tkAsWorker
	out := must(t, "get", "configmap", name+"-config", "-n", takeoverNS, "-o", "jsonpath={.data.hostfile}")
	want := fmt.Sprintf("%s-launcher.%s.%s.svc slots=1\n", name, name, takeoverNS)
	for i := range workers {
		want += fmt.Sprintf("%s-worker-%d.%s.%s.svc slots=1\n", name, i, name, takeoverNS)
	}
	if out != want {
		t.Errorf("hostfile of %s:\n%s\nwant:\n%s", name, out, want)
	}
}

// containerArgs are the arguments of the Deployment mpi-operator of ns.
func containerArgs(t *testing.T, ns string) []string {
	t.Helper()
	var args []string
	out := must(t, "get", "deployment", "mpi-operator", "-n", ns, "-o", "jsonpath={.spec.template.spec.containers[0].args}")
	if err := json.Unmarshal([]byte(out), &args); err != nil {
		t.Fatalf("the Deployment's args %s: %v", out, err)
	}
	return args
}

// moduleDir is the directory of a module version in the module cache,
// downloaded through the module proxy when it is not there yet.
func moduleDir(t *testing.T, path, version string) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", path+"@"+version)
	// Out of any module: the repository's own is not the one wanted.
	cmd.Dir = t.TempDir()
	cmd.Env = append(harness.Environ("GOFLAGS", "GOWORK"), "GOFLAGS=", "GOWORK=off")
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jsonErr := json.Unmarshal(out, &info); err != nil || jsonErr != nil || info.Dir == "" {
		t.Fatalf("go mod download %s@%s: %v %v %s", path, version, err, jsonErr, info.Error)
	}
	return info.Dir
}

// requiredVersion is the version of module that the go.mod of the module
// in dir requires.
func requiredVersion(t *testing.T, dir, module string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == module {
			return f[1]
		}
	}
	t.Fatalf("%s/go.mod does not require %s", dir, module)
	return ""
}

// buildUpstreamOperator runs hack/upstream-operator.sh for upstreamVersion
// (it builds nothing once the binary is in its cache) and returns the
// cache directory it prints.
func buildUpstreamOperator(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(suite.Root, "hack", "upstream-operator.sh"))
	cmd.Dir = suite.Root
	cmd.Env = append(os.Environ(), "UPSTREAM_OPERATOR_VERSION="+upstreamVersion)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/upstream-operator.sh: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

// samePod compares two pods of one name, one made by upstream's operator
// and one by this one: their labels, annotations and spec, but the node
// they run on and the name the API server gives the volume of the
// ServiceAccount's token.
func samePod(t *testing.T, theirs, ours *object) {
	t.Helper()
	shape := func(o *object) map[string]any {
		raw := tokenVolume.ReplaceAll(o.raw, []byte(`"kube-api-access"`))
		var pod struct {
			Metadata struct {
				Labels      map[string]any `json:"labels"`
				Annotations map[string]any `json:"annotations"`
			} `json:"metadata"`
			Spec map[string]any `json:"spec"`
		}
		if err := json.Unmarshal(raw, &pod); err != nil {
			t.Fatal(err)
		}
		delete(pod.Spec, "nodeName")
		return map[string]any{"labels": pod.Metadata.Labels, "annotations": pod.Metadata.Annotations, "spec": pod.Spec}
	}
	if diff := cmp.Diff(shape(theirs), shape(ours)); diff != "" {
		t.Errorf("pod %s as upstream's operator made it (-) and as this one makes it (+):\n%s", ours.Metadata.Name, diff)
	}
}

// tokenVolume is the volume the ServiceAccount admission plugin adds to
// every pod, under a name of its own.
var tokenVolume = regexp.MustCompile(`"kube-api-access-[a-z0-9]+"`)
