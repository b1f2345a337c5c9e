package plugin

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	common "github.com/kubeflow/common/pkg/apis/common/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	kubeflow "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v1"
	"github.com/kubeflow/mpi-operator/pkg/elastic"
)

// Labels and names the operator gives a job's children (see the upstream
// contract: they are shared with the upstream operator).
const (
	labelJobName      = "mpi-job-name"
	labelRole         = "mpi-job-role"
	labelReplicaIndex = "replica-index"
	roleLauncher      = "launcher"
	roleWorker        = "worker"
	discoverHostsKey  = "discover_hosts.sh"
)

// ConfigMapName, LauncherName and WorkerPrefix name a job's children.
func ConfigMapName(job string) string { return job + "-config" }
func LauncherName(job string) string  { return job + "-launcher" }
func WorkerPrefix(job string) string  { return job + "-worker-" }

// JobView is what `get` shows of a job: a summary, then one row per pod.
type JobView struct {
	Name, Namespace string
	Status          string
	Duration        time.Duration
	Desired         int32
	Min, Max        int32 // zero without an elastic policy
	Running, Listed int
	Instances       []Instance
}

// Instance is one pod of the job.
type Instance struct {
	Name          string
	Role          string
	Index         int // -1 for the launcher
	Phase         string
	Node          string
	IP            string
	Listed        bool
	DrainingSince string // the annotation's value; empty when not draining
	GPUs          int64
	Restarts      int32
	Age           time.Duration
}

// Snapshot is what a view is made of, as read from the API server.
type Snapshot struct {
	API  API
	Job  *Job
	Pods []corev1.Pod // the job's pods (label API.LabelJobName)
	// Hosts is the content of discover_hosts.sh; empty when the ConfigMap
	// does not exist yet.
	Hosts string
}

// View summarises a snapshot at now.
func View(s Snapshot, now time.Time) JobView {
	job := s.Job
	v := JobView{
		Name:      job.Name,
		Namespace: job.Namespace,
		Status:    StatusText(job),
		Duration:  jobDuration(job, now),
		Desired:   workerReplicas(job),
	}
	if ep := job.Spec.ElasticPolicy; ep != nil {
		v.Min, v.Max = deref(ep.MinReplicas, 1), deref(ep.MaxReplicas, v.Desired)
	}
	listed := elastic.ListedPods(s.Hosts)
	for i := range s.Pods {
		in := instanceOf(s.API, job.Name, &s.Pods[i], listed, now)
		if in.Role == roleWorker {
			if in.Phase == string(corev1.PodRunning) && in.DrainingSince == "" {
				v.Running++
			}
			if in.Listed {
				v.Listed++
			}
		}
		v.Instances = append(v.Instances, in)
	}
	slices.SortFunc(v.Instances, func(a, b Instance) int {
		return cmp.Or(cmp.Compare(a.Index, b.Index), cmp.Compare(a.Name, b.Name))
	})
	return v
}

// instanceOf describes one pod.
func instanceOf(api API, job string, pod *corev1.Pod, listed map[string]bool, now time.Time) Instance {
	in := Instance{
		Name:          pod.Name,
		Role:          pod.Labels[api.LabelRole],
		Index:         -1,
		Phase:         string(pod.Status.Phase),
		Node:          pod.Spec.NodeName,
		IP:            pod.Status.PodIP,
		Listed:        listed[pod.Name],
		DrainingSince: drainingSince(pod),
		Age:           now.Sub(pod.CreationTimestamp.Time),
	}
	if pod.DeletionTimestamp != nil {
		in.Phase = "Terminating"
	}
	if in.Role == roleWorker {
		in.Index, _ = WorkerIndex(api, job, pod)
	}
	for _, c := range pod.Spec.Containers {
		if q, ok := c.Resources.Limits[ResourceGPU]; ok {
			in.GPUs += q.Value()
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		in.Restarts += cs.RestartCount
	}
	return in
}

// drainingSince is when the worker started draining, to the second; the
// annotation as it is if it is not a time.
func drainingSince(pod *corev1.Pod) string {
	v := pod.Annotations[elastic.AnnotationDrainingSince]
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t.UTC().Format(time.RFC3339)
	}
	return v
}

// WorkerIndex tells a worker's index: under v1 from its replica-index
// label (either key) or else its name's suffix, under v2beta1 from its
// name's suffix (API.IndexFromName).
func WorkerIndex(api API, job string, pod *corev1.Pod) (int, bool) {
	if !api.IndexFromName {
		for _, key := range []string{labelReplicaIndex, common.ReplicaIndexLabel} {
			if i, ok := elastic.ParseIndex(pod.Labels[key]); ok {
				return i, true
			}
		}
	}
	suffix, ok := strings.CutPrefix(pod.Name, WorkerPrefix(job))
	if !ok {
		return 0, false
	}
	return elastic.ParseIndex(suffix)
}

// StatusText is the job's state as one word: its finishing condition if it
// has one, else its latest true condition, followed by Resizing or Blocked
// while those hold. Both versions name their conditions alike.
func StatusText(job *Job) string {
	state := "Pending"
	var extra []string
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch t := c.Type; t {
		case "Resizing", "Blocked":
			extra = append(extra, t)
		default:
			if state != string(common.JobSucceeded) && state != string(common.JobFailed) {
				state = t
			}
		}
	}
	return strings.Join(append([]string{state}, extra...), ",")
}

// jobDuration is from the job's start (or creation) to its end, or now.
func jobDuration(job *Job, now time.Time) time.Duration {
	start := job.CreationTimestamp.Time
	if st := job.Status.StartTime; st != nil {
		start = st.Time
	}
	end := now
	if ct := job.Status.CompletionTime; ct != nil {
		end = ct.Time
	}
	return max(end.Sub(start), 0)
}

// workerReplicas is the job's Worker.replicas; an unset one counts as 1,
// as the operator takes it.
func workerReplicas(job *Job) int32 {
	spec, ok := job.Spec.MPIReplicaSpecs[string(kubeflow.MPIReplicaTypeWorker)]
	if !ok {
		return 0
	}
	return deref(spec.Replicas, 1)
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// HumanDuration formats a duration as kubectl's AGE column does.
func HumanDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return duration.HumanDuration(d)
}

// workerCounts is "desired/running/listed" of a view.
func (v JobView) workerCounts() []string {
	return []string{strconv.Itoa(int(v.Desired)), strconv.Itoa(v.Running), strconv.Itoa(v.Listed)}
}
