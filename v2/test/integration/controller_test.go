package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/kubeflow/mpi-operator/test/harness"
	kubeflow "github.com/kubeflow/mpi-operator/v2/pkg/apis/kubeflow/v2beta1"
)

// wantOwned fails the test unless obj carries the label app=<job> (when
// app) and the job as its controller.
func wantOwned(t *testing.T, what string, obj metav1.Object, job *kubeflow.MPIJob, app bool) {
	t.Helper()
	if app && obj.GetLabels()["app"] != job.Name {
		t.Errorf("%s has labels %v, want app=%s", what, obj.GetLabels(), job.Name)
	}
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.UID != job.UID || ref.Kind != kubeflow.Kind || ref.APIVersion != kubeflow.SchemeGroupVersion.String() {
		t.Errorf("%s has controller %+v, want MPIJob %s (%s)", what, ref, job.Name, job.UID)
	}
}

// podLabelsOf are the labels upstream v0.8.0 puts on a job's pods.
func podLabelsOf(job, role string) map[string]string {
	return map[string]string{labelOperator: "mpi-operator", labelJobName: job, labelJobRole: role}
}

// launcherPod waits for the one pod of the job's launcher Job to run and
// returns it.
func launcherPod(t *testing.T, ns, job string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	harness.Eventually(t, poll, waitTimeout, "the launcher of "+job+" to run", func() (bool, error) {
		list, err := suite.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{
			LabelSelector: "batch.kubernetes.io/job-name=" + job + "-launcher",
		})
		if err != nil || len(list.Items) != 1 {
			return false, err
		}
		pod = list.Items[0]
		return pod.Status.Phase == corev1.PodRunning, nil
	})
	return pod
}

// TestUpstreamPi runs upstream v0.8.0's pi example: the children have
// upstream's names, labels and shapes, a worker is listed only once it
// runs and its name resolves, the job runs, and the launcher's success is
// the job's, after which its running workers go (cleanPodPolicy Running).
func TestUpstreamPi(t *testing.T) {
	ns, h := controllerTest(t)
	var pi kubeflow.MPIJob
	if err := yaml.UnmarshalStrict([]byte(upstreamPi), &pi); err != nil {
		t.Fatal(err)
	}
	pi.Namespace = ns
	job := createJob(t, &pi)
	ctx := context.Background()

	workers := runningWorkers(t, ns, "pi", 2)
	launcher := launcherPod(t, ns, "pi")
	running := waitForCondition(t, ns, "pi", kubeflow.JobRunning, "MPIJobRunning")
	if !hasCondition(running, kubeflow.JobCreated, corev1.ConditionTrue, "MPIJobCreated") || running.Status.StartTime == nil {
		t.Errorf("a running job with conditions %s and startTime %v", conditionsOf(running), running.Status.StartTime)
	}

	svc, err := suite.Kube.CoreV1().Services(ns).Get(ctx, "pi", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantOwned(t, "Service pi", svc, job, true)
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses ||
		!sameLabels(map[string]string{labelOperator: "mpi-operator", labelJobName: "pi"}, svc.Spec.Selector) {
		t.Errorf("Service pi: clusterIP %q, publishNotReadyAddresses %t, selector %v; want a headless Service of the job's pods that publishes them unready",
			svc.Spec.ClusterIP, svc.Spec.PublishNotReadyAddresses, svc.Spec.Selector)
	}
	secret, err := suite.Kube.CoreV1().Secrets(ns).Get(ctx, "pi-ssh", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantOwned(t, "Secret pi-ssh", secret, job, true)
	if secret.Type != corev1.SecretTypeSSHAuth || !strings.Contains(string(secret.Data["ssh-privatekey"]), "PRIVATE KEY") ||
		!strings.HasPrefix(string(secret.Data["ssh-publickey"]), "ecdsa-sha2-nistp521 ") {
		t.Errorf("Secret pi-ssh of type %s with keys %v, want kubernetes.io/ssh-auth with an ECDSA key pair", secret.Type, secret.Data)
	}
	cm, err := suite.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "pi-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantOwned(t, "ConfigMap pi-config", cm, job, true)
	hosts := []string{hostName(ns, "pi", "pi-worker-0"), hostName(ns, "pi", "pi-worker-1")}
	if want := hosts[0] + " slots=1\n" + hosts[1] + " slots=1\n"; cm.Data["hostfile"] != want {
		t.Errorf("hostfile %q, want %q", cm.Data["hostfile"], want)
	}
	if want := "#!/bin/sh\necho " + hosts[0] + "\necho " + hosts[1] + "\n"; cm.Data["discover_hosts.sh"] != want {
		t.Errorf("discover_hosts.sh %q, want %q", cm.Data["discover_hosts.sh"], want)
	}

	for i, w := range workers {
		name := fmt.Sprintf("pi-worker-%d", i)
		wantOwned(t, "worker "+w.Name, &w, job, false)
		labels := podLabelsOf("pi", "worker")
		labels[labelIndex] = fmt.Sprint(i)
		if w.Name != name || !sameLabels(w.Labels, labels) || w.Spec.Hostname != name || w.Spec.Subdomain != "pi" || w.Spec.NodeName == "" {
			t.Errorf("worker %s: labels %v, hostname %q, subdomain %q, node %q; want %s with labels %v under Service pi, scheduled",
				w.Name, w.Labels, w.Spec.Hostname, w.Spec.Subdomain, w.Spec.NodeName, name, labels)
		}
		if !slices.Contains(w.Spec.Containers[0].Env, corev1.EnvVar{Name: "K_MPI_JOB_ROLE", Value: "worker"}) {
			t.Errorf("worker %s has the environment %v, want K_MPI_JOB_ROLE=worker", w.Name, w.Spec.Containers[0].Env)
		}
	}

	lj, err := suite.Kube.BatchV1().Jobs(ns).Get(ctx, "pi-launcher", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantOwned(t, "Job pi-launcher", lj, job, true)
	labels := podLabelsOf("pi", "launcher")
	if tmpl := lj.Spec.Template; !sameLabels(tmpl.Labels, labels) || tmpl.Spec.Hostname != "pi-launcher" || tmpl.Spec.Subdomain != "pi" ||
		lj.Spec.BackoffLimit == nil || *lj.Spec.BackoffLimit != 3 || lj.Spec.TTLSecondsAfterFinished == nil || *lj.Spec.TTLSecondsAfterFinished != 60 {
		t.Errorf("Job pi-launcher: pod labels %v, hostname %q, subdomain %q, backoffLimit %v, ttl %v; want labels %v, pi-launcher under pi, 3 and 60",
			tmpl.Labels, tmpl.Spec.Hostname, tmpl.Spec.Subdomain, lj.Spec.BackoffLimit, lj.Spec.TTLSecondsAfterFinished, labels)
	}
	if !sameLabels(launcher.Labels, labels) {
		t.Errorf("the launcher's pod has labels %v, want %v", launcher.Labels, labels)
	}

	// kwok leaves the pods of batch Jobs running in this cluster, so the
	// launcher's exit is written here as its kubelet would report it; the
	// workers are left to the controller.
	setPodStatus(t, ns, launcher.Name, func(s *corev1.PodStatus) {
		endContainers(s, 0, "Completed")
		s.Phase = corev1.PodSucceeded
	})
	done := waitForCondition(t, ns, "pi", kubeflow.JobSucceeded, "MPIJobSucceeded")
	if done.Status.CompletionTime == nil || hasCondition(done, kubeflow.JobRunning, corev1.ConditionTrue, "") {
		t.Errorf("a succeeded job with conditions %s and completionTime %v", conditionsOf(done), done.Status.CompletionTime)
	}
	harness.Eventually(t, poll, waitTimeout, "the running workers of a finished job to go", func() (bool, error) {
		return len(workerPods(t, ns, "pi", true)) == 0, nil
	})

	h.finish()
	h.checkWorkerOrder("pi")
	if got := h.workersEver("pi"); !slices.Equal(got, workerNames("pi", 0, 1)) {
		t.Errorf("the job had workers %v, want pi-worker-0 and pi-worker-1 only", got)
	}
}

// TestManagedElsewhere creates a job that Kueue's MultiKueue manages: the
// controller writes nothing for it, not even its status, while it runs a
// job of its own in the same namespace.
func TestManagedElsewhere(t *testing.T) {
	ns, h := controllerTest(t)
	remote := validJob(ns, "remote", 2)
	remote.Spec.RunPolicy.ManagedBy = new(kubeflow.MultiKueueController)
	created := createJob(t, remote)
	createJob(t, validJob(ns, "local", 1))

	// The controller has synced the namespace, and any event of the remote
	// job with it.
	waitForCondition(t, ns, "local", kubeflow.JobRunning, "MPIJobRunning")
	holds(t, 2*time.Second, "the remote job left alone", func() (bool, string) {
		objs := ownedBy(objectsOf(t, ns), "remote")
		return len(objs) == 0, fmt.Sprintf("the namespace holds %v", objs)
	})
	h.finish()
	versions := h.jobVersions("remote")
	if len(versions) != 1 || versions[0].ResourceVersion != created.ResourceVersion {
		t.Errorf("the remote job was written %d time(s) after its creation", len(versions)-1)
	}
	if job := getJob(t, ns, "remote"); job.ResourceVersion != created.ResourceVersion || len(job.Status.Conditions) > 0 {
		t.Errorf("the remote job has resourceVersion %s (created as %s) and conditions %s", job.ResourceVersion, created.ResourceVersion, conditionsOf(job))
	}
	if events := jobEvents(t, ns, "remote"); len(events) > 0 {
		t.Errorf("events about the remote job: %v", events)
	}
}

// TestForeignConfigMap blocks a job on a ConfigMap of its files' name that
// someone else created: the job is Blocked with a Warning naming it, the
// ConfigMap is left as it is, and the job runs once it is gone.
func TestForeignConfigMap(t *testing.T) {
	t.Parallel()
	ns := suite.Namespace(t)
	startController(t, ns, nil)
	ctx := context.Background()
	cms := suite.Kube.CoreV1().ConfigMaps(ns)
	foreign, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "blocked-config"},
		Data:       map[string]string{"settings": "someone else's"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	job := createJob(t, validJob(ns, "blocked", 1))

	const named = `ConfigMap "blocked-config"`
	blocked := waitForCondition(t, ns, "blocked", "Blocked", "ErrResourceExists")
	if msg := jobCondition(blocked, "Blocked").Message; !strings.Contains(msg, named) {
		t.Errorf("the Blocked condition says %q, want it to name %s", msg, named)
	}
	waitForEvent(t, ns, "blocked", corev1.EventTypeWarning, "ErrResourceExists", named)
	if got, err := cms.Get(ctx, "blocked-config", metav1.GetOptions{}); err != nil || got.ResourceVersion != foreign.ResourceVersion {
		t.Errorf("the foreign ConfigMap was written: %v", err)
	}
	if objs := objectsOf(t, ns); slices.Contains(objs, "Job/blocked-launcher") {
		t.Errorf("a blocked job got its launcher: %v", objs)
	}

	if err := cms.Delete(ctx, "blocked-config", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	runningWorkers(t, ns, "blocked", 1)
	runs := waitForCondition(t, ns, "blocked", kubeflow.JobRunning, "MPIJobRunning")
	if jobCondition(runs, "Blocked") != nil {
		t.Errorf("the job runs with conditions %s, want Blocked gone", conditionsOf(runs))
	}
	cm, err := cms.Get(ctx, "blocked-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantOwned(t, "the new ConfigMap", cm, job, true)
}

// upstreamChildren creates the children that upstream v0.8.0 gives a job of
// two workers, as it leaves them: the headless Service, the SSH Secret, the
// files, the workers and the launcher Job, each with upstream's labels and
// the job as controller.
func upstreamChildren(t *testing.T, job *kubeflow.MPIJob) {
	t.Helper()
	ctx := context.Background()
	ns, name := job.Namespace, job.Name
	meta := func(child string) metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name: child, Labels: map[string]string{"app": name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, kubeflow.SchemeGroupVersionKind)},
		}
	}
	core := suite.Kube.CoreV1()
	_, err := core.Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: meta(name),
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true,
			Selector: map[string]string{labelOperator: "mpi-operator", labelJobName: name},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = core.Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: meta(name + "-ssh"),
		Type:       corev1.SecretTypeSSHAuth,
		Data: map[string][]byte{
			corev1.SSHAuthPrivateKey: []byte("-----BEGIN EC PRIVATE KEY-----\nupstream's\n-----END EC PRIVATE KEY-----\n"),
			"ssh-publickey":          []byte("ecdsa-sha2-nistp521 upstream's\n"),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// discover_hosts.sh lists the workers once they run: listUpstream.
	var hostfile strings.Builder
	for i := range 2 {
		fmt.Fprintf(&hostfile, "%s slots=1\n", hostName(ns, name, fmt.Sprintf("%s-worker-%d", name, i)))
	}
	_, err = core.ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: meta(name + "-config"),
		Data:       map[string]string{"hostfile": hostfile.String(), "discover_hosts.sh": "#!/bin/sh\n"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	sshVolume := corev1.Volume{Name: "ssh-auth", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: name + "-ssh",
		Items: []corev1.KeyToPath{
			{Key: corev1.SSHAuthPrivateKey, Path: "id_rsa"},
			{Key: "ssh-publickey", Path: "id_rsa.pub"},
			{Key: "ssh-publickey", Path: "authorized_keys"},
		},
	}}}
	sshMount := corev1.VolumeMount{Name: "ssh-auth", MountPath: "/root/.ssh"}
	for i := range 2 {
		pod := fmt.Sprintf("%s-worker-%d", name, i)
		m := meta(pod)
		m.Labels = podLabelsOf(name, "worker")
		m.Labels[labelIndex] = fmt.Sprint(i)
		_, err := core.Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: m,
			Spec: corev1.PodSpec{
				Hostname: pod, Subdomain: name, RestartPolicy: corev1.RestartPolicyNever,
				Volumes: []corev1.Volume{sshVolume},
				Containers: []corev1.Container{{
					Name: "worker", Image: "mpioperator/mpi-pi:openmpi", Command: []string{"/usr/sbin/sshd", "-De"},
					Env:          []corev1.EnvVar{{Name: "K_MPI_JOB_ROLE", Value: "worker"}},
					VolumeMounts: []corev1.VolumeMount{sshMount},
				}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	launcherLabels := podLabelsOf(name, "launcher")
	launcherLabels[labelIndex] = "0"
	_, err = suite.Kube.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
		ObjectMeta: meta(name + "-launcher"),
		Spec: batchv1.JobSpec{
			BackoffLimit: new(int32(6)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: launcherLabels},
				Spec: corev1.PodSpec{
					Hostname: name + "-launcher", Subdomain: name, RestartPolicy: corev1.RestartPolicyOnFailure,
					Volumes: []corev1.Volume{sshVolume, {Name: "mpi-job-config", VolumeSource: corev1.VolumeSource{
						ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: name + "-config"},
							Items: []corev1.KeyToPath{
								{Key: "hostfile", Path: "hostfile", Mode: new(int32(0o444))},
								{Key: "discover_hosts.sh", Path: "discover_hosts.sh", Mode: new(int32(0o555))},
							},
						},
					}}},
					Containers: []corev1.Container{{
						Name: "launcher", Image: "mpioperator/mpi-pi:openmpi", Command: []string{"mpirun", "-n", "2", "/home/mpiuser/pi"},
						Env: []corev1.EnvVar{
							{Name: "K_MPI_JOB_ROLE", Value: "launcher"},
							{Name: "OMPI_MCA_orte_keep_fqdn_hostnames", Value: "true"},
							{Name: "OMPI_MCA_orte_default_hostfile", Value: "/etc/mpi/hostfile"},
						},
						VolumeMounts: []corev1.VolumeMount{sshMount, {Name: "mpi-job-config", MountPath: "/etc/mpi"}},
					}},
				},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// listUpstream writes the job's running workers into its discover_hosts.sh,
// as upstream does once they run.
func listUpstream(t *testing.T, ns, job string, workers []corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	cms := suite.Kube.CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(ctx, job+"-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\n"
	for _, w := range workers {
		script += "echo " + hostName(ns, job, w.Name) + "\n"
	}
	cm.Data["discover_hosts.sh"] = script
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// uids maps "Kind/name" of every object objectsOf lists to its UID.
func uids(t *testing.T, ns string) map[string]types.UID {
	t.Helper()
	ctx := context.Background()
	out := map[string]types.UID{}
	for _, o := range objectsOf(t, ns) {
		kind, name, _ := strings.Cut(o, "/")
		var m metav1.Object
		var err error
		switch kind {
		case "Pod":
			m, err = suite.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		case "Service":
			m, err = suite.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		case "ConfigMap":
			m, err = suite.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		case "Secret":
			m, err = suite.Kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		case "Job":
			m, err = suite.Kube.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		}
		if err != nil {
			t.Fatalf("getting %s: %v", o, err)
		}
		out[o] = m.GetUID()
	}
	return out
}

// TestAdoptUpstreamChildren starts the controller on a running job whose
// children upstream v0.8.0 made: it takes them over as they are (no pod
// replaced, nothing created, nothing blocked) and the job runs on.
func TestAdoptUpstreamChildren(t *testing.T) {
	t.Parallel()
	ns := suite.Namespace(t)
	ctx := context.Background()
	job := createJob(t, validJob(ns, "legacy", 2))
	upstreamChildren(t, job)
	var workers []corev1.Pod
	harness.Eventually(t, poll, waitTimeout, "upstream's workers to run", func() (bool, error) {
		workers = workerPods(t, ns, "legacy", true)
		return len(workers) == 2 && workers[0].Status.Phase == corev1.PodRunning && workers[1].Status.Phase == corev1.PodRunning, nil
	})
	listUpstream(t, ns, "legacy", workers)
	launcherPod(t, ns, "legacy")
	// The status upstream wrote for the running job.
	now := metav1.Now()
	job.Status = kubeflow.JobStatus{
		Conditions: []kubeflow.JobCondition{
			{Type: kubeflow.JobCreated, Status: corev1.ConditionTrue, Reason: "MPIJobCreated", LastUpdateTime: now, LastTransitionTime: now},
			{Type: kubeflow.JobRunning, Status: corev1.ConditionTrue, Reason: "MPIJobRunning", LastUpdateTime: now, LastTransitionTime: now},
		},
		ReplicaStatuses: map[kubeflow.MPIReplicaType]*kubeflow.ReplicaStatus{
			kubeflow.MPIReplicaTypeLauncher: {Active: 1}, kubeflow.MPIReplicaTypeWorker: {Active: 2},
		},
		StartTime: &now,
	}
	if _, err := jobs(ns).UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := uids(t, ns)
	secret, err := suite.Kube.CoreV1().Secrets(ns).Get(ctx, "legacy-ssh", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	h := recordHistory(t, ns)
	requests := &requestLog{}
	startController(t, ns, requests.config())
	harness.Eventually(t, poll, waitTimeout, "the controller to take the job over", func() (bool, error) {
		got := getJob(t, ns, "legacy")
		return got.Status.LastReconcileTime != nil && hasCondition(got, kubeflow.JobRunning, corev1.ConditionTrue, ""), nil
	})
	runningWorkers(t, ns, "legacy", 2)
	holds(t, 2*time.Second, "upstream's children kept", func() (bool, string) {
		after := uids(t, ns)
		for o, uid := range before {
			if after[o] != uid {
				return false, fmt.Sprintf("%s is %s, was %s", o, after[o], uid)
			}
		}
		return len(after) == len(before), fmt.Sprintf("the namespace holds %v, had %v", after, before)
	})
	h.finish()

	if c := requests.creates(); len(c) > 0 {
		t.Errorf("the controller created %v; every child existed", c)
	}
	for _, v := range h.jobVersions("legacy") {
		if c := jobCondition(v, "Blocked"); c != nil {
			t.Errorf("the job was Blocked (%s) at resourceVersion %s", c.Message, v.ResourceVersion)
		}
		if !hasCondition(v, kubeflow.JobRunning, corev1.ConditionTrue, "") {
			t.Errorf("the job was not Running at resourceVersion %s: %s", v.ResourceVersion, conditionsOf(v))
		}
	}
	if d := h.workerDeletions("legacy"); len(d) > 0 {
		t.Errorf("%d worker(s) deleted, the first %s", len(d), d[0].pod.Name)
	}
	for _, e := range jobEvents(t, ns, "legacy") {
		if strings.HasPrefix(e, corev1.EventTypeWarning+"/") {
			t.Errorf("a warning: %s", e)
		}
	}
	kept, err := suite.Kube.CoreV1().Secrets(ns).Get(ctx, "legacy-ssh", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(kept.Data["ssh-publickey"]) != string(secret.Data["ssh-publickey"]) {
		t.Errorf("the SSH key of the running pods was replaced")
	}
	h.checkWorkerOrder("legacy")
}

// TestRestartMidScale stops the controller while it creates the workers of
// a scale from 1 to 6, with creations in flight, and starts another: the
// job settles at exactly 6 workers, each under a name of its own, every
// pod the job's.
func TestRestartMidScale(t *testing.T) {
	t.Parallel()
	ns := suite.Namespace(t)
	h := recordHistory(t, ns)
	slow := &requestLog{holdCreates: 500 * time.Millisecond}
	first := startController(t, ns, slow.config())
	job := createJob(t, elasticJob(ns, "restart", 1, 1, 8, 1))
	runningWorkers(t, ns, "restart", 1)

	scaleJob(t, ns, "restart", 6)
	harness.Eventually(t, poll, waitTimeout, "the first new worker", func() (bool, error) {
		return len(workerPods(t, ns, "restart", false)) >= 2, nil
	})
	first.stop()
	t.Logf("workers when the first controller stopped: %v", podNames(workerPods(t, ns, "restart", false)))
	startController(t, ns, nil)

	pods := runningWorkers(t, ns, "restart", 6)
	holds(t, 2*time.Second, "6 workers", func() (bool, string) {
		now := workerPods(t, ns, "restart", false)
		return slices.Equal(podNames(now), podNames(pods)), fmt.Sprintf("workers %v, had %v", podNames(now), podNames(pods))
	})
	h.finish()

	seen := map[int]string{}
	for _, p := range pods {
		wantOwned(t, "worker "+p.Name, &p, job, false)
		i := workerIndex("restart", p.Name)
		if i < 0 || p.Labels[labelIndex] != fmt.Sprint(i) || seen[i] != "" {
			t.Errorf("worker %s has index label %q (index %d already %q)", p.Name, p.Labels[labelIndex], i, seen[i])
		}
		seen[i] = p.Name
	}
	if most := h.maxLiveWorkers("restart"); most != 6 {
		t.Errorf("the job had %d live workers at once, want at most 6", most)
	}
	if ever := h.workersEver("restart"); len(ever) != 6 {
		t.Errorf("the job had workers %v, want 6 pods in all", ever)
	}
	list, err := suite.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(&p); ref == nil || (ref.UID != job.UID && ref.Name != "restart-launcher") {
			t.Errorf("pod %s is not the job's: controller %+v", p.Name, ref)
		}
	}
	h.checkWorkerOrder("restart")
}

// TestStrippedChildIsAdopted: a user or a mutating policy takes every label
// off a running job's files, Service, SSH Secret and one of its workers. The
// label-filtered informers lose sight of them; the create that finds each
// gives its labels back, the same objects stay (no worker is recreated, the
// SSH key is kept), the job is never Blocked, and it goes on listing both
// workers.
func TestStrippedChildIsAdopted(t *testing.T) {
	t.Parallel()
	ns := suite.Namespace(t)
	startController(t, ns, nil)
	ctx := context.Background()
	createJob(t, validJob(ns, "bare", 2))
	runningWorkers(t, ns, "bare", 2)
	before := uids(t, ns)

	core := suite.Kube.CoreV1()
	strip := []byte(`{"metadata":{"labels":null}}`)
	patches := map[string]func() error{
		"ConfigMap/bare-config": func() error {
			_, err := core.ConfigMaps(ns).Patch(ctx, "bare-config", types.MergePatchType, strip, metav1.PatchOptions{})
			return err
		},
		"Service/bare": func() error {
			_, err := core.Services(ns).Patch(ctx, "bare", types.MergePatchType, strip, metav1.PatchOptions{})
			return err
		},
		"Secret/bare-ssh": func() error {
			_, err := core.Secrets(ns).Patch(ctx, "bare-ssh", types.MergePatchType, strip, metav1.PatchOptions{})
			return err
		},
		"Pod/bare-worker-1": func() error {
			_, err := core.Pods(ns).Patch(ctx, "bare-worker-1", types.MergePatchType, strip, metav1.PatchOptions{})
			return err
		},
	}
	for what, patch := range patches {
		if err := patch(); err != nil {
			t.Fatalf("stripping the labels of %s: %v", what, err)
		}
	}
	harness.Eventually(t, poll, waitTimeout, "every stripped child to get its labels back", func() (bool, error) {
		cm, err := core.ConfigMaps(ns).Get(ctx, "bare-config", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		svc, err := core.Services(ns).Get(ctx, "bare", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		secret, err := core.Secrets(ns).Get(ctx, "bare-ssh", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod, err := core.Pods(ns).Get(ctx, "bare-worker-1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return cm.Labels["app"] == "bare" && svc.Labels["app"] == "bare" && secret.Labels["app"] == "bare" &&
			sameLabels(pod.Labels, podLabelsOf("bare", "worker")), nil
	})
	after := uids(t, ns)
	for what := range patches {
		if before[what] == "" || after[what] != before[what] {
			t.Errorf("%s was replaced (uid %q, was %q), want the same object adopted", what, after[what], before[what])
		}
	}
	runningWorkers(t, ns, "bare", 2)
	if c := jobCondition(getJob(t, ns, "bare"), "Blocked"); c != nil && c.Status == corev1.ConditionTrue {
		t.Errorf("job Blocked after its children lost their labels: %s", c.Message)
	}
}
