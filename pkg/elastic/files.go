package elastic

import (
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// MergeFiles returns cur, the object that holds a job's files as the
// cluster has it, with what the writer owns taken from want: the data
// (hostfile, discover_hosts.sh, ...) and the State annotations (set as
// want has them, removed where it has none). Other annotations and labels
// stay as they are. It reports whether that differs from cur, and never
// modifies cur.
//
// A change of NextIndex alone is not a difference: the index is recorded
// with the next change of the files. It matters only for a worker that
// discover_hosts.sh lists (Horovod may blacklist that name), and a write
// that lists a worker records an index above its own; while a worker
// exists, its pod raises the index anyway. So new workers, which raise it
// as they appear, cost no write before they are listed.
func MergeFiles(cur, want *corev1.ConfigMap) (*corev1.ConfigMap, bool) {
	keys := StateAnnotations()
	same := maps.Equal(cur.Data, want.Data)
	for _, k := range keys {
		same = same && (k == AnnotationNextWorkerIndex || cur.Annotations[k] == want.Annotations[k])
	}
	if same {
		return cur, false
	}
	merged := cur.DeepCopy()
	merged.Data = maps.Clone(want.Data)
	for _, k := range keys {
		if v, ok := want.Annotations[k]; ok {
			if merged.Annotations == nil {
				merged.Annotations = map[string]string{}
			}
			merged.Annotations[k] = v
		} else {
			delete(merged.Annotations, k)
		}
	}
	return merged, true
}

// HostfileKey is the ConfigMap key of the hostfile, in both APIs.
const HostfileKey = "hostfile"

// MergeElasticFiles is MergeFiles for an elastic job, with one more
// change that is no difference: a hostfile that only gains lines (hosts)
// while every other file stays as it is. The hostfile then names workers just
// created, which no process may use before discover_hosts.sh lists them,
// and Horovod starts processes from that script, not from the hostfile;
// the new names are written with the write that lists the first of them.
// So a growth costs one ConfigMap write fewer. A hostfile that loses a
// host is written at once.
func MergeElasticFiles(cur, want *corev1.ConfigMap) (*corev1.ConfigMap, bool) {
	if hostfileOnlyGains(cur.Data, want.Data) {
		held := want.DeepCopy()
		held.Data[HostfileKey] = cur.Data[HostfileKey]
		return MergeFiles(cur, held)
	}
	return MergeFiles(cur, want)
}

// hostfileOnlyGains tells whether want differs from cur in the hostfile
// alone, and its hostfile has every line of cur's and more.
func hostfileOnlyGains(cur, want map[string]string) bool {
	if len(cur) != len(want) {
		return false
	}
	for k, v := range want {
		if w, ok := cur[k]; !ok || (k != HostfileKey && w != v) {
			return false
		}
	}
	if cur[HostfileKey] == want[HostfileKey] {
		return false
	}
	return gains(lines(cur[HostfileKey]), lines(want[HostfileKey]))
}

// gains tells whether after holds every member of before, and more.
func gains(before, after map[string]bool) bool {
	if len(after) <= len(before) {
		return false
	}
	for m := range before {
		if !after[m] {
			return false
		}
	}
	return true
}

// lines are the non-empty lines of a file, as a set.
func lines(file string) map[string]bool {
	set := map[string]bool{}
	for _, l := range strings.Split(file, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			set[l] = true
		}
	}
	return set
}

// ParseDiscoverHosts returns the hosts a discover_hosts.sh lists: one
// "echo <host>:<slots>" (v1) or "echo <host>" (v2beta1) line each, the host
// possibly quoted. It reads what the operators write, for the tools that
// show or check it.
func ParseDiscoverHosts(script string) map[string]bool {
	hosts := map[string]bool{}
	for _, line := range strings.Split(script, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "echo ")
		if !ok {
			continue
		}
		rest = strings.Trim(strings.TrimSpace(rest), `"'`)
		if i := strings.LastIndexByte(rest, ':'); i > 0 {
			rest = rest[:i]
		}
		if rest != "" {
			hosts[rest] = true
		}
	}
	return hosts
}

// ListedPods returns the names of the pods a discover_hosts.sh lists: the
// hosts of ParseDiscoverHosts, which are pod names (v1) or the pods' DNS
// names (v2beta1), up to their first dot.
func ListedPods(script string) map[string]bool {
	pods := map[string]bool{}
	for host := range ParseDiscoverHosts(script) {
		name, _, _ := strings.Cut(host, ".")
		pods[name] = true
	}
	return pods
}
