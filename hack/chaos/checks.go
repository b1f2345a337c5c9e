package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
	"github.com/kubeflow/mpi-operator/test/harness"
)

// snapshot is the namespace as one set of lists read it.
type snapshot struct {
	jobs  []kubeflow.MPIJob
	pods  []corev1.Pod
	cms   map[string]*corev1.ConfigMap
	roles map[string]*rbacv1.Role
}

func readSnapshot(ctx context.Context, cl *harness.Cluster) (*snapshot, error) {
	s := &snapshot{cms: map[string]*corev1.ConfigMap{}, roles: map[string]*rbacv1.Role{}}
	jobs, err := cl.MPI.KubeflowV1().MPIJobs(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	s.jobs = jobs.Items
	pods, err := cl.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	s.pods = pods.Items
	cms, err := cl.Kube.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range cms.Items {
		s.cms[cms.Items[i].Name] = &cms.Items[i]
	}
	roles, err := cl.Kube.RbacV1().Roles(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range roles.Items {
		s.roles[roles.Items[i].Name] = &roles.Items[i]
	}
	return s, nil
}

// jobState is one job as a snapshot shows it.
type jobState struct {
	name    string
	desired int // its spec
	maxW    int // its elasticPolicy.maxReplicas
	// live are its live workers (not draining, not being deleted, not
	// finished), others its other worker pods.
	live, others []*corev1.Pod
	running      int
	launchers    []*corev1.Pod
	hosts, exec  map[string]bool
	statusActive int
}

func (s *snapshot) states() map[string]*jobState {
	out := map[string]*jobState{}
	for i := range s.jobs {
		j := &s.jobs[i]
		js := &jobState{name: j.Name, hosts: map[string]bool{}, exec: map[string]bool{}}
		if w := j.Spec.MPIReplicaSpecs[kubeflow.MPIReplicaTypeWorker]; w != nil && w.Replicas != nil {
			js.desired = int(*w.Replicas)
		}
		if ep := j.Spec.ElasticPolicy; ep != nil && ep.MaxReplicas != nil {
			js.maxW = int(*ep.MaxReplicas)
		}
		if rs := j.Status.ReplicaStatuses[kubeflow.MPIReplicaTypeWorker]; rs != nil {
			js.statusActive = int(rs.Active)
		}
		if cm := s.cms[j.Name+harness.ConfigSuffix]; cm != nil {
			js.hosts = elastic.ParseDiscoverHosts(cm.Data[harness.DiscoverHostsKey])
		}
		if r := s.roles[j.Name+harness.LauncherSuffix]; r != nil {
			js.exec = harness.RoleExec(r)
		}
		out[j.Name] = js
	}
	for i := range s.pods {
		p := &s.pods[i]
		js := out[p.Labels[harness.LabelJobName]]
		if js == nil {
			continue
		}
		switch p.Labels[harness.LabelRole] {
		case "launcher":
			if p.DeletionTimestamp == nil {
				js.launchers = append(js.launchers, p)
			}
		case "worker":
			_, draining := p.Annotations[harness.AnnotationDrainingSince]
			finished := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
			if draining || finished || p.DeletionTimestamp != nil {
				js.others = append(js.others, p)
				continue
			}
			js.live = append(js.live, p)
			if p.Status.Phase == corev1.PodRunning {
				js.running++
			}
		}
	}
	return out
}

func podNames(pods []*corev1.Pod) map[string]bool {
	out := map[string]bool{}
	for _, p := range pods {
		out[p.Name] = true
	}
	return out
}

// unsettled says why the job has not settled on want workers, or "".
func (js *jobState) unsettled(want int) string {
	var why []string
	live := podNames(js.live)
	if js.desired != want {
		why = append(why, fmt.Sprintf("spec asks for %d workers, the harness set %d", js.desired, want))
	}
	if len(js.live) != js.desired || js.running != len(js.live) {
		why = append(why, fmt.Sprintf("%d live workers (%d Running) for %d wanted", len(js.live), js.running, js.desired))
	}
	if len(js.others) > 0 {
		why = append(why, fmt.Sprintf("%d draining, deleted or finished workers left", len(js.others)))
	}
	if !maps.Equal(js.hosts, live) {
		why = append(why, "discover_hosts.sh lists "+sortedNames(js.hosts))
	}
	if !maps.Equal(js.exec, live) {
		why = append(why, "the Role allows exec into "+sortedNames(js.exec))
	}
	if len(js.launchers) != 1 {
		why = append(why, fmt.Sprintf("%d launchers", len(js.launchers)))
	}
	if js.statusActive != js.desired {
		why = append(why, fmt.Sprintf("status counts %d active workers", js.statusActive))
	}
	if len(why) == 0 {
		return ""
	}
	return js.name + ": " + strings.Join(why, "; ")
}

// waitSettled polls the namespace until every job has exactly its desired
// workers, all Running, listed and allowed exec, nothing else, one launcher,
// and a status that counts them. It returns the last states read.
func waitSettled(ctx context.Context, cl *harness.Cluster, desired map[string]int, timeout time.Duration) ([]string, error) {
	var why []string
	err := waitFor(ctx, timeout, func() bool {
		s, err := readSnapshot(ctx, cl)
		if err != nil {
			why = []string{"reading the namespace: " + err.Error()}
			return false
		}
		why = unsettledJobs(s.states(), desired)
		if len(why) > 0 {
			// Poll every two seconds, not every 100 ms.
			_ = sleepCtx(ctx, 2*time.Second)
		}
		return len(why) == 0
	})
	return why, err
}

func unsettledJobs(states map[string]*jobState, desired map[string]int) []string {
	var why []string
	for _, name := range slices.Sorted(maps.Keys(desired)) {
		js := states[name]
		if js == nil {
			why = append(why, name+": missing")
			continue
		}
		if w := js.unsettled(desired[name]); w != "" {
			why = append(why, w)
		}
	}
	return why
}

func unsettledSummary(why []string) string {
	if len(why) > 5 {
		return strings.Join(why[:5], " | ") + fmt.Sprintf(" | and %d more", len(why)-5)
	}
	return strings.Join(why, " | ")
}

// finalChecks are the checks on the end state and on the whole run's
// history.
type finalChecks struct {
	jobs int
	// unsettled: jobs not on their desired workers at the end, and why.
	unsettled []string
	// wrongCount: jobs whose live workers are not their desired replicas.
	wrongCount []string
	// duplicates: two live workers with one index, more worker pods than
	// wanted, more than one launcher.
	duplicates []string
	// orphans: pods without a live controlling MPIJob, or matching none.
	orphans []string
	pods    int

	deletedWorkers     int
	deletedWhileListed []string
	listedAfterDrain   []string
	listedNameReused   []string
	createdWorkers     int
	roleAfterPod       []string
	// aboveMax: jobs that had more live workers at once than maxReplicas.
	aboveMax []string

	// execChecked names were reviewed; execBeyond were allowed without
	// being a live worker; execMissing are live workers not allowed.
	execChecked             int
	execBeyond, execMissing []string
}

func runChecks(ctx context.Context, cl *harness.Cluster, rec *recorder, desired map[string]int, o *options) (*finalChecks, error) {
	s, err := readSnapshot(ctx, cl)
	if err != nil {
		return nil, err
	}
	states := s.states()
	c := &finalChecks{jobs: len(desired), pods: len(s.pods)}
	c.unsettled = unsettledJobs(states, desired)
	for _, name := range slices.Sorted(maps.Keys(states)) {
		js := states[name]
		if len(js.live) != js.desired {
			c.wrongCount = append(c.wrongCount, fmt.Sprintf("%s: %d live for %d", name, len(js.live), js.desired))
		}
		c.duplicates = append(c.duplicates, duplicates(js)...)
	}
	c.orphans = orphans(s)

	// The history of the whole run.
	names := map[string][]string{}
	rec.with(func(h *harness.History) {
		c.deletedWhileListed = slices.Clone(h.DeletedWhileListed)
		c.listedAfterDrain = slices.Clone(h.ListedAfterDrain)
		c.listedNameReused = slices.Clone(h.ListedNameReused)
		for name, j := range h.Jobs {
			for _, w := range j.AllWorkers() {
				c.createdWorkers++
				if !w.DeletingAt.IsZero() {
					c.deletedWorkers++
				}
				names[name] = append(names[name], w.Name)
			}
			c.roleAfterPod = append(c.roleAfterPod, j.RoleAfterPod()...)
			if j.MaxLive > o.maxWorkers {
				c.aboveMax = append(c.aboveMax, fmt.Sprintf("%s: %d live workers", name, j.MaxLive))
			}
		}
	})

	// Exec rights, as each launcher's ServiceAccount.
	jobNames := slices.Sorted(maps.Keys(states))
	for i, name := range jobNames {
		js := states[name]
		live := podNames(js.live)
		for _, n := range reviewNames(name, jobNames[(i+1)%len(jobNames)], names[name], live) {
			allowed, err := mayExec(ctx, cl, name, n)
			if err != nil {
				return nil, fmt.Errorf("SubjectAccessReview for %s: %w", name, err)
			}
			c.execChecked++
			switch {
			case allowed && !live[n]:
				c.execBeyond = append(c.execBeyond, fmt.Sprintf("%s may exec into %s", name+harness.LauncherSuffix, n))
			case !allowed && live[n]:
				c.execMissing = append(c.execMissing, fmt.Sprintf("%s may not exec into %s", name+harness.LauncherSuffix, n))
			}
		}
	}
	return c, nil
}

// reviewNames are the pod names to ask about for a job: every worker it
// ever had and has, and some it never had: the next indices, a far one,
// another job's first worker, its own launcher.
func reviewNames(job, other string, ever []string, live map[string]bool) []string {
	set := map[string]bool{}
	top := -1
	for _, n := range append(slices.Collect(maps.Keys(live)), ever...) {
		set[n] = true
		if i, err := strconv.Atoi(strings.TrimPrefix(n, job+harness.WorkerInfix)); err == nil {
			top = max(top, i)
		}
	}
	for _, n := range []string{
		fmt.Sprintf("%s%s%d", job, harness.WorkerInfix, top+1),
		fmt.Sprintf("%s%s%d", job, harness.WorkerInfix, top+2),
		job + harness.WorkerInfix + "999",
		other + harness.WorkerInfix + "0",
		job + harness.LauncherSuffix,
	} {
		set[n] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// mayExec asks the API server whether the job's launcher may exec into pod.
func mayExec(ctx context.Context, cl *harness.Cluster, job, pod string) (bool, error) {
	sa := job + harness.LauncherSuffix
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   "system:serviceaccount:" + namespace + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: "create", Resource: "pods", Subresource: "exec", Name: pod,
		},
	}}
	out, err := cl.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return out.Status.Allowed, nil
}

// workerIndex is a worker's index: its replica-index label, or the number
// after <job>-worker-.
func workerIndex(job string, p *corev1.Pod) string {
	if v, ok := p.Labels[harness.LabelReplicaIndex]; ok {
		return v
	}
	return strings.TrimPrefix(p.Name, job+harness.WorkerInfix)
}

// duplicates are two live workers with one index, more worker pods than
// the job wants, more than one launcher.
func duplicates(js *jobState) []string {
	var out []string
	byIndex := map[string][]string{}
	for _, p := range js.live {
		i := workerIndex(js.name, p)
		byIndex[i] = append(byIndex[i], p.Name)
	}
	for _, i := range slices.Sorted(maps.Keys(byIndex)) {
		if len(byIndex[i]) > 1 {
			out = append(out, fmt.Sprintf("%s: index %s held by %s", js.name, i, strings.Join(byIndex[i], ", ")))
		}
	}
	if n := len(js.live) + len(js.others); n > js.desired {
		out = append(out, fmt.Sprintf("%s: %d worker pods for %d wanted", js.name, n, js.desired))
	}
	if len(js.launchers) > 1 {
		out = append(out, fmt.Sprintf("%s: %d launchers", js.name, len(js.launchers)))
	}
	return out
}

// orphans are pods whose controller is not a live MPIJob of the namespace,
// or whose labels name another job or none.
func orphans(s *snapshot) []string {
	byUID := map[string]*kubeflow.MPIJob{}
	for i := range s.jobs {
		byUID[string(s.jobs[i].UID)] = &s.jobs[i]
	}
	var out []string
	for i := range s.pods {
		p := &s.pods[i]
		ref := metav1.GetControllerOf(p)
		var job *kubeflow.MPIJob
		if ref != nil && ref.Kind == kubeflow.Kind {
			job = byUID[string(ref.UID)]
		}
		switch {
		case job == nil:
			out = append(out, p.Name+" (no live controlling MPIJob)")
		case job.DeletionTimestamp != nil:
			out = append(out, p.Name+" (its MPIJob is being deleted)")
		case p.Labels[harness.LabelJobName] != job.Name:
			out = append(out, fmt.Sprintf("%s (controlled by %s, labelled for %q)", p.Name, job.Name, p.Labels[harness.LabelJobName]))
		case !strings.HasPrefix(p.Name, job.Name+harness.WorkerInfix) && p.Name != job.Name+harness.LauncherSuffix:
			out = append(out, fmt.Sprintf("%s (controlled by %s, named for no child of it)", p.Name, job.Name))
		}
	}
	return out
}
