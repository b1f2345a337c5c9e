package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeflow/mpi-operator/test/harness"
)

// timeline is a file of everything the harness did and saw, one stamped
// line each: the evidence behind a failed check.
type timeline struct {
	mu sync.Mutex
	f  *os.File
}

func newTimeline(path string) (*timeline, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &timeline{f: f}, nil
}

func (t *timeline) printf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.f, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func (t *timeline) close() { _ = t.f.Close() }

// recorder follows the chaos namespace through a harness.History for the
// whole run, fed by etcd's watch (harness.WatchEtcd), writing what changed
// to the timeline.
type recorder struct {
	mu   sync.Mutex
	hist *harness.History
	tl   *timeline
	// changes counts the writes that changed a worker, a discover_hosts.sh
	// or a Role.
	changes int
}

func newRecorder(tl *timeline) *recorder {
	return &recorder{hist: harness.NewHistory(harness.V1), tl: tl}
}

func (r *recorder) addJob(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hist.AddJob(name)
}

// with runs f with the History locked.
func (r *recorder) with(f func(h *harness.History)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r.hist)
}

// observe records one write, in revision order.
func (r *recorder) observe(obj any, deleted bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	h := r.hist
	before := [3]int{len(h.DeletedWhileListed), len(h.ListedAfterDrain), len(h.ListedNameReused)}
	ob := h.Observe(now, obj, deleted)
	if ob.Job == nil {
		return
	}
	var what []string
	if pod, ok := obj.(*corev1.Pod); ok && ob.Worker != nil {
		w := ob.Worker
		switch {
		case ob.NewWorker:
			what = append(what, "worker "+w.Name+" created")
		case ob.Drained:
			what = append(what, "worker "+w.Name+" marked draining")
		case ob.Deleting && deleted:
			what = append(what, "worker "+w.Name+" deleted")
		case ob.Deleting:
			what = append(what, "worker "+w.Name+" being deleted")
		case deleted:
			what = append(what, "worker "+w.Name+" gone")
		case ob.Running:
			what = append(what, "worker "+w.Name+" Running")
		}
		if len(what) > 0 {
			what[0] += " (rv " + pod.ResourceVersion + ")"
		}
	}
	if ob.HostsChanged {
		v := ob.Job.CurrentHosts()
		what = append(what, fmt.Sprintf("discover_hosts.sh of %s (rv %d): %s", ob.Job.Name, v.RV, sortedNames(v.Hosts)))
	}
	if ob.ReachChanged {
		v := ob.Job.Reach[len(ob.Job.Reach)-1]
		what = append(what, fmt.Sprintf("Role %s%s exec (rv %d): %s", ob.Job.Name, harness.LauncherSuffix, v.RV, sortedNames(v.Names)))
	}
	if len(what) > 0 {
		r.changes++
	}
	for i, list := range [][]string{h.DeletedWhileListed, h.ListedAfterDrain, h.ListedNameReused} {
		if len(list) > before[i] {
			what = append(what, []string{"DELETED WHILE LISTED", "LISTED AFTER DRAIN", "LISTED NAME REUSED"}[i]+": "+list[len(list)-1])
		}
	}
	for _, w := range what {
		r.tl.printf("etcd: %s", w)
	}
}

func sortedNames(set map[string]bool) string {
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	slices.Sort(names)
	return "[" + strings.Join(names, " ") + "]"
}
