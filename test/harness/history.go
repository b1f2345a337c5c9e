package harness

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
)

// History follows the worker pods, discover_hosts.sh and what makes a
// worker reachable (the launcher's Role for v1, the job Service's
// EndpointSlices for v2beta1) of MPIJobs through watch events and stamps
// every change with the time the harness received it.
//
// Orderings that must hold whatever the timing ("deleted while listed",
// "Role before pod") are decided with resourceVersions: a cluster with a
// single etcd orders every write to any resource by its revision.
//
// A History is not safe for concurrent use: its owner serializes Observe
// and its reads.
type History struct {
	API  API
	Jobs map[string]*JobHistory
	// DeletedWhileListed are workers that got a deletionTimestamp (or a
	// DELETE event) while the ConfigMap version written before that
	// deletion listed them.
	DeletedWhileListed []string
	// ListedAfterDrain are workers that a ConfigMap version written after
	// their draining mark (or deletion) still listed.
	ListedAfterDrain []string
	// ListedNameReused are workers created under the name of an earlier
	// worker of the job that discover_hosts.sh had listed (Horovod may
	// have blacklisted that name).
	ListedNameReused []string
}

// Names and annotations the operator uses (see pkg/controller/names.go).
const (
	LabelJobName            = "mpi-job-name"
	LabelRole               = "mpi-job-role"
	LabelReplicaIndex       = "replica-index"
	AnnotationDrainingSince = "mpi-operator.kubeflow.org/draining-since"
	DiscoverHostsKey        = "discover_hosts.sh"
	ConfigSuffix            = "-config"
	LauncherSuffix          = "-launcher"
	WorkerInfix             = "-worker-"
)

// HostsVersion is one content of a job's discover_hosts.sh.
type HostsVersion struct {
	At    time.Time
	RV    int64
	Hosts map[string]bool
}

// ReachVersion is one set of reachable workers: those the launcher's Role
// allows exec into (v1), or those the job Service's EndpointSlices name
// (v2beta1).
type ReachVersion struct {
	At    time.Time
	RV    int64
	Names map[string]bool
}

// Worker is the life of one worker pod as the harness saw it.
type Worker struct {
	Name    string
	UID     string
	AddedAt time.Time
	AddedRV int64
	// RunningAt is when the harness first saw phase Running.
	RunningAt time.Time
	// ListedAt is when the harness first saw discover_hosts.sh list it.
	ListedAt time.Time
	ListedRV int64
	// DrainingAt is when it was first seen with the draining annotation.
	DrainingAt time.Time
	DrainingRV int64
	// DeletingAt is when it was first seen deleted: a deletionTimestamp,
	// or a DELETE event.
	DeletingAt time.Time
	DeletingRV int64
	GoneAt     time.Time
	Finished   bool
	// flagged is set once the worker is in ListedAfterDrain.
	flagged bool
}

// Live workers count towards the job's replicas.
func (w *Worker) Live() bool {
	return w.DrainingAt.IsZero() && w.DeletingAt.IsZero() && w.GoneAt.IsZero() && !w.Finished
}

// JobHistory is what the harness saw of one job.
type JobHistory struct {
	Name  string
	Hosts []HostsVersion
	Reach []ReachVersion
	// Workers holds the latest worker of each name.
	Workers map[string]*Worker
	// Replaced are earlier workers whose name a later worker took.
	Replaced []*Worker
	// MaxLive is the most live workers the job had at once.
	MaxLive int
	// early holds names listed before the harness saw their pod.
	early map[string]HostsVersion
	// slices are the workers each EndpointSlice of the job's Service
	// names (v2beta1).
	slices map[string]map[string]bool
}

// NewHistory returns an empty History of jobs of the API.
func NewHistory(api API) *History { return &History{API: api, Jobs: map[string]*JobHistory{}} }

// AddJob registers a job, before it is created so that every event of its
// children finds it. Events of jobs not registered are ignored.
func (h *History) AddJob(name string) *JobHistory {
	j := &JobHistory{Name: name, Workers: map[string]*Worker{}, early: map[string]HostsVersion{}, slices: map[string]map[string]bool{}}
	h.Jobs[name] = j
	return j
}

// CurrentHosts is the latest discover_hosts.sh, or nil.
func (j *JobHistory) CurrentHosts() *HostsVersion {
	if len(j.Hosts) == 0 {
		return nil
	}
	return &j.Hosts[len(j.Hosts)-1]
}

// HostsBefore is the discover_hosts.sh content of the newest ConfigMap
// write older than revision rv.
func (j *JobHistory) HostsBefore(rv int64) map[string]bool {
	return latestBefore(j.Hosts, rv, func(v HostsVersion) (int64, map[string]bool) { return v.RV, v.Hosts })
}

// ReachBefore is the set of workers reachable after the newest write
// older than revision rv of a Role or EndpointSlice.
func (j *JobHistory) ReachBefore(rv int64) map[string]bool {
	return latestBefore(j.Reach, rv, func(v ReachVersion) (int64, map[string]bool) { return v.RV, v.Names })
}

// latestBefore returns the names of the newest version older than rv.
func latestBefore[V any](versions []V, rv int64, get func(V) (int64, map[string]bool)) map[string]bool {
	for i := len(versions) - 1; i >= 0; i-- {
		if vrv, names := get(versions[i]); vrv < rv {
			return names
		}
	}
	return nil
}

// LiveWorkers are the job's live workers, in no order.
func (j *JobHistory) LiveWorkers() []*Worker {
	var out []*Worker
	for _, w := range j.Workers {
		if w.Live() {
			out = append(out, w)
		}
	}
	return out
}

// AllWorkers are every worker the job had, replaced ones included.
func (j *JobHistory) AllWorkers() []*Worker {
	return append(slices.Collect(maps.Values(j.Workers)), j.Replaced...)
}

// RoleAfterPod are the workers created while the launcher's Role did not
// allow exec into them (v1): the Role version in force at the pod's first
// version the harness saw does not name it.
func (j *JobHistory) RoleAfterPod() []string {
	return j.workersWhere(func(w *Worker) bool { return !j.ReachBefore(w.AddedRV + 1)[w.Name] })
}

// ListedBeforeResolvable are the workers that discover_hosts.sh listed
// while no EndpointSlice of the job's Service named them (v2beta1): the
// slices in force at the first ConfigMap version listing the worker do not
// name it.
func (j *JobHistory) ListedBeforeResolvable() []string {
	return j.workersWhere(func(w *Worker) bool { return w.ListedRV != 0 && !j.ReachBefore(w.ListedRV)[w.Name] })
}

// Unreachable are the workers that broke the API's ordering: RoleAfterPod
// for v1, ListedBeforeResolvable for v2beta1.
func (h *History) Unreachable(j *JobHistory) []string {
	if h.API.ReachBySlices {
		return j.ListedBeforeResolvable()
	}
	return j.RoleAfterPod()
}

func (j *JobHistory) workersWhere(bad func(*Worker) bool) []string {
	var out []string
	for _, w := range j.AllWorkers() {
		if bad(w) {
			out = append(out, w.Name)
		}
	}
	slices.Sort(out)
	return out
}

// Observation says what one event changed.
type Observation struct {
	// Job is the job the event concerned; nil when none the History follows.
	Job *JobHistory
	// Worker is the worker of a pod event.
	Worker *Worker
	// NewWorker: the first event of this worker; Running, Drained,
	// Deleting: its first in phase Running, with the draining mark,
	// deleted; HostsChanged, ReachChanged: a new version.
	NewWorker, Running, Drained, Deleting bool
	HostsChanged, ReachChanged            bool
}

// ParseRV reads a resourceVersion; 0 when it is not a number.
func ParseRV(s string) int64 {
	v, _ := strconv.ParseInt(s, 10, 64)
	return v
}

// ListedPods are the pods a discover_hosts.sh of the API lists.
func (a API) ListedPods(script string) map[string]bool {
	if !a.FQDNHosts {
		return elastic.ParseDiscoverHosts(script)
	}
	pods := map[string]bool{}
	for host := range elastic.ParseDiscoverHosts(script) {
		pods[a.HostPod(host)] = true
	}
	return pods
}

// Observe records one event of a pod, ConfigMap, Role or EndpointSlice (or
// a tombstone of one) received at now.
func (h *History) Observe(now time.Time, obj any, deleted bool) Observation {
	tombstone := false
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, tombstone = t.Obj, true
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		return h.onPod(now, o, deleted, tombstone)
	case *corev1.ConfigMap:
		if !deleted {
			return h.onConfigMap(now, o)
		}
	case *rbacv1.Role:
		if !deleted {
			return h.onRole(now, o)
		}
	case *discoveryv1.EndpointSlice:
		return h.onSlice(now, o, deleted, tombstone)
	}
	return Observation{}
}

func (h *History) onPod(now time.Time, pod *corev1.Pod, deleted, tombstone bool) Observation {
	if !h.API.IsWorker(pod.Labels) {
		return Observation{}
	}
	j := h.Jobs[pod.Labels[h.API.LabelJobName]]
	if j == nil {
		return Observation{}
	}
	ob := Observation{Job: j}
	rv := ParseRV(pod.ResourceVersion)
	w := j.Workers[pod.Name]
	if w != nil && w.UID != string(pod.UID) && !deleted {
		// A new pod under an old name: the old one is gone, whether or
		// not the harness saw its deletion.
		if w.GoneAt.IsZero() {
			w.GoneAt = now
		}
		if !w.ListedAt.IsZero() {
			h.ListedNameReused = append(h.ListedNameReused, pod.Name)
		}
		j.Replaced = append(j.Replaced, w)
		w = nil
	}
	if w == nil {
		w = &Worker{Name: pod.Name, UID: string(pod.UID), AddedAt: now, AddedRV: rv}
		j.Workers[pod.Name] = w
		ob.NewWorker = true
		if v, ok := j.early[pod.Name]; ok {
			w.ListedAt, w.ListedRV = v.At, v.RV
			delete(j.early, pod.Name)
		}
	}
	ob.Worker = w
	switch pod.Status.Phase {
	case corev1.PodRunning:
		if w.RunningAt.IsZero() {
			w.RunningAt = now
			ob.Running = true
		}
	case corev1.PodSucceeded, corev1.PodFailed:
		w.Finished = true
	}
	if _, ok := pod.Annotations[AnnotationDrainingSince]; ok && w.DrainingAt.IsZero() {
		w.DrainingAt, w.DrainingRV = now, rv
		ob.Drained = true
	}
	if (pod.DeletionTimestamp != nil || deleted) && w.DeletingAt.IsZero() {
		w.DeletingAt, w.DeletingRV = now, rv
		ob.Deleting = true
		listed := false
		if tombstone {
			// The final state is unknown, and so is its revision: go by
			// what the harness saw last.
			if cur := j.CurrentHosts(); cur != nil {
				listed = cur.Hosts[w.Name]
			}
		} else {
			listed = j.HostsBefore(rv)[w.Name]
		}
		if listed {
			h.DeletedWhileListed = append(h.DeletedWhileListed, w.Name)
		}
	}
	if deleted && w.GoneAt.IsZero() {
		w.GoneAt = now
	}
	j.MaxLive = max(j.MaxLive, len(j.LiveWorkers()))
	return ob
}

// jobOf returns the followed job whose child is named <job><suffix>.
func (h *History) jobOf(child, suffix string) *JobHistory {
	if name, ok := strings.CutSuffix(child, suffix); ok {
		return h.Jobs[name]
	}
	return nil
}

func (h *History) onConfigMap(now time.Time, cm *corev1.ConfigMap) Observation {
	j := h.jobOf(cm.Name, ConfigSuffix)
	if j == nil {
		return Observation{}
	}
	ob := Observation{Job: j}
	hosts := h.API.ListedPods(cm.Data[DiscoverHostsKey])
	if cur := j.CurrentHosts(); cur != nil && maps.Equal(cur.Hosts, hosts) {
		return ob
	}
	ob.HostsChanged = true
	v := HostsVersion{At: now, RV: ParseRV(cm.ResourceVersion), Hosts: hosts}
	j.Hosts = append(j.Hosts, v)
	for host := range hosts {
		w := j.Workers[host]
		if w == nil {
			if _, seen := j.early[host]; !seen && !strings.HasSuffix(host, LauncherSuffix) {
				j.early[host] = v
			}
			continue
		}
		if w.ListedAt.IsZero() {
			w.ListedAt, w.ListedRV = now, v.RV
		}
		drained := w.DrainingRV != 0 && w.DrainingRV < v.RV
		deleting := w.DeletingRV != 0 && w.DeletingRV < v.RV
		if (drained || deleting) && !w.flagged {
			w.flagged = true
			h.ListedAfterDrain = append(h.ListedAfterDrain, w.Name)
		}
	}
	return ob
}

// IsLauncherPod tells whether a pod's name is that of a launcher: the
// v1 operator's launcher pod, job+LauncherSuffix, or a pod of the
// v2beta1 operator's launcher Job, which the Job controller names
// job+LauncherSuffix+"-" and five characters.
func IsLauncherPod(name string) bool {
	if strings.HasSuffix(name, LauncherSuffix) {
		return true
	}
	const generated = len("-abcde")
	n := len(name)
	return n > generated && name[n-generated] == '-' && strings.HasSuffix(name[:n-generated], LauncherSuffix)
}

func (h *History) onRole(now time.Time, role *rbacv1.Role) Observation {
	j := h.jobOf(role.Name, LauncherSuffix)
	if j == nil {
		return Observation{}
	}
	return j.reached(now, ParseRV(role.ResourceVersion), RoleExec(role))
}

// onSlice follows the EndpointSlices of a job's Service, which is named
// after the job: a worker is reachable while any of them names it.
func (h *History) onSlice(now time.Time, s *discoveryv1.EndpointSlice, deleted, tombstone bool) Observation {
	j := h.Jobs[s.Labels[discoveryv1.LabelServiceName]]
	if j == nil {
		return Observation{}
	}
	if deleted {
		delete(j.slices, s.Name)
	} else {
		j.slices[s.Name] = SliceNames(s)
	}
	names := map[string]bool{}
	for _, set := range j.slices {
		maps.Copy(names, set)
	}
	// A watch's deletion carries the revision of the delete; a tombstone
	// only the slice's last one: go by what the harness saw last.
	rv := ParseRV(s.ResourceVersion)
	if tombstone {
		if cur := j.CurrentHosts(); cur != nil {
			rv = max(rv, cur.RV)
		}
	}
	if n := len(j.Reach); n > 0 {
		rv = max(rv, j.Reach[n-1].RV)
	}
	return j.reached(now, rv, names)
}

// reached records a new set of reachable workers.
func (j *JobHistory) reached(now time.Time, rv int64, names map[string]bool) Observation {
	if n := len(j.Reach); n > 0 && maps.Equal(j.Reach[n-1].Names, names) {
		return Observation{Job: j}
	}
	j.Reach = append(j.Reach, ReachVersion{At: now, RV: rv, Names: names})
	return Observation{Job: j, ReachChanged: true}
}

// SliceNames are the pods an EndpointSlice gives a DNS name: endpoints of
// a pod whose hostname is the pod's name.
func SliceNames(s *discoveryv1.EndpointSlice) map[string]bool {
	names := map[string]bool{}
	for _, ep := range s.Endpoints {
		if ep.Hostname != nil && ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" && *ep.Hostname == ep.TargetRef.Name {
			names[ep.TargetRef.Name] = true
		}
	}
	return names
}

// RoleExec is the set of pods a launcher's Role allows exec into.
func RoleExec(role *rbacv1.Role) map[string]bool {
	exec := map[string]bool{}
	for _, rule := range role.Rules {
		if slices.Contains(rule.Resources, "pods/exec") {
			for _, n := range rule.ResourceNames {
				exec[n] = true
			}
		}
	}
	return exec
}

// EventHandlers calls on for every add, update and delete of an informer.
func EventHandlers(on func(obj any, deleted bool)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { on(obj, false) },
		UpdateFunc: func(_, obj any) { on(obj, false) },
		DeleteFunc: func(obj any) { on(obj, true) },
	}
}

// WatchNamespace starts informers on the pods, ConfigMaps and Roles (v1)
// or EndpointSlices (v2beta1) of a namespace, with handlers(kind) ("pod",
// "configmap", "role", "endpointslice") handling the events of each, and
// returns once their caches have synced. stop ends them.
func WatchNamespace(kube kubernetes.Interface, api API, ns string, handlers func(kind string) cache.ResourceEventHandler) (stop func(), err error) {
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(ns))
	watched := map[string]cache.SharedIndexInformer{
		"pod":       factory.Core().V1().Pods().Informer(),
		"configmap": factory.Core().V1().ConfigMaps().Informer(),
	}
	if api.ReachBySlices {
		watched["endpointslice"] = factory.Discovery().V1().EndpointSlices().Informer()
	} else {
		watched["role"] = factory.Rbac().V1().Roles().Informer()
	}
	for kind, inf := range watched {
		if _, err := inf.AddEventHandler(handlers(kind)); err != nil {
			return nil, err
		}
	}
	ch := make(chan struct{})
	factory.Start(ch)
	factory.WaitForCacheSync(ch)
	return func() {
		close(ch)
		factory.Shutdown()
	}, nil
}
