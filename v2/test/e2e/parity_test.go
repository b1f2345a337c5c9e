package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// parityNS holds the jobs this operator starts afresh for the comparison
// with upstream's.
const parityNS = "parity"

// kept is a difference from upstream's children that this operator makes
// on purpose: at path ("" for the whole object), in the objects of kind
// (those of job only, when set: the job's own name, or its name and a
// suffix). row is the first cell of its row in v2/README.md's table of
// differences from upstream.
type kept struct {
	kind, job, path string
	row, why        string
}

// keptDifferences are the differences the Parity step accepts. Each must
// show up: an entry that matches nothing is stale and fails the step.
var keptDifferences = append([]kept{
	{
		kind: "Service", path: ".spec.publishNotReadyAddresses",
		row: "the job's Service",
		why: "published always, not only when the launcher is a worker: MPI reaches its hosts by name from the moment they run",
	},
	{
		kind: "PodGroup", job: tkWaitReady, path: ".spec.minMember",
		row: "PodGroup `minMember` of a job with `launcherCreationPolicy: WaitForWorkersReady` (no `schedulingPolicy.minAvailable`)",
		why: "the workers only: the launcher is created once they are Ready, so a gang that counts it would never be complete",
	},
	{
		kind: "Job", path: ".spec.podReplacementPolicy",
		row: "the launcher Job's `podReplacementPolicy`",
		why: "Failed: a new launcher pod starts only once the last one stopped, since both have one host name and a terminating one may still run mpirun",
	},
	{
		kind: "Job", path: ".spec.template.metadata.ownerReferences",
		row: "the launcher Job's pod template `ownerReferences`",
		why: "none: the Job controller makes the Job the launcher pod's only owner whatever the template says, so upstream's reference there does nothing",
	},
	{
		kind: "MPIJob", job: tkSuspended, path: ".status.conditions",
		row: "the order of the conditions of a job created suspended",
		why: "Suspended last, where kubectl's State column (the last condition) shows it",
	},
}, createdSuspended()...)

// createdSuspended are the kept differences of the job created suspended:
// upstream's operator makes its Service, Secret, ConfigMap and a
// suspended launcher Job at once, this one nothing until it first runs.
func createdSuspended() []kept {
	var out []kept
	for _, kind := range []string{"Service", "Secret", "ConfigMap", "Job"} {
		out = append(out, kept{kind: kind, job: tkSuspended, row: "a job created suspended",
			why: "a queued job costs no object (no key pair, no launcher Job) until admitted; its launcher Job is made from the template as admitted, and a WaitForWorkersReady launcher Job is not resumed before its workers are Ready"})
	}
	return out
}

// difference is one way in which this operator's object departs from
// upstream's.
type difference struct {
	object string // <kind>/<name>
	path   string // JSON path in the object; "" for the object itself
	// what: "changed" (another value), "missing" (upstream's field or
	// element is not in ours), "order" (the same elements in another
	// order), "added" (ours only).
	what         string
	theirs, ours any
}

func (d difference) String() string {
	switch d.what {
	case "missing":
		return fmt.Sprintf("%s %s: missing, upstream's is %s", d.object, where(d.path), compact(d.theirs))
	case "added":
		return fmt.Sprintf("%s %s: added, %s", d.object, where(d.path), compact(d.ours))
	default:
		return fmt.Sprintf("%s %s: %s, upstream's %s, ours %s", d.object, where(d.path), d.what, compact(d.theirs), compact(d.ours))
	}
}

func compact(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	s := strings.TrimSpace(b.String())
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// where is a kept difference's path, or "(the object)".
func where(path string) string {
	if path == "" {
		return "(the object)"
	}
	return path
}

// parity creates under this operator, in parityNS, the jobs upstream's
// operator started in takeoverNS, waits for the same state, and compares
// every child, the launcher's pod and the jobs themselves with what
// upstream's operator made: each field of upstream's object must be in
// ours with upstream's value, but the kept differences; ours may add
// fields, which are listed.
func (tk *takeover) parity(t *testing.T) {
	start := time.Now()
	waitNamespace(t, parityNS)
	createTakeoverJobs(t, tk.module, parityNS)
	waitTakeoverJobs(t, parityNS, "this operator")
	ours := takeSnapshot(t, parityNS)
	t.Logf("this operator ran the jobs afresh in %s in %s", parityNS, time.Since(start).Round(100*time.Millisecond))

	for _, k := range keptDifferences {
		t.Logf("kept on purpose: %s %s%s: %s (v2/README.md: %q)", k.kind, where(k.path), onlyFor(k.job), k.why, k.row)
	}
	checkREADMERows(t, keptDifferences)

	diffs := compareSnapshots(tk.upstreamSnapshot, ours)
	used := make([]bool, len(keptDifferences))
	var added, unexpected []string
	for _, d := range diffs {
		if i := matchKept(d); i >= 0 {
			used[i] = true
			t.Logf("  kept: %s", d)
			continue
		}
		if d.what == "added" {
			added = append(added, d.String())
			continue
		}
		unexpected = append(unexpected, d.String())
	}
	t.Logf("%d objects compared; fields this operator adds (%d):\n  %s", len(tk.upstreamSnapshot), len(added), strings.Join(added, "\n  "))
	if len(unexpected) > 0 {
		t.Errorf("%d differences from upstream's objects are not kept on purpose:\n  %s", len(unexpected), strings.Join(unexpected, "\n  "))
	}
	for i, k := range keptDifferences {
		if !used[i] {
			t.Errorf("the kept difference %s %s%s shows nowhere: remove it from keptDifferences (and v2/README.md if it is gone)", k.kind, where(k.path), onlyFor(k.job))
		}
	}
	if _, err := kubectl("delete", "namespace", parityNS, "--wait=false"); err != nil {
		t.Log(err)
	}
}

func onlyFor(job string) string {
	if job == "" {
		return ""
	}
	return " (job " + job + ")"
}

// matchKept is the index of the kept difference d is, or -1.
func matchKept(d difference) int {
	kind, name, _ := strings.Cut(d.object, "/")
	for i, k := range keptDifferences {
		if k.kind == kind && k.path == d.path && (k.job == "" || name == k.job || strings.HasPrefix(name, k.job+"-")) {
			return i
		}
	}
	return -1
}

// checkREADMERows checks that each kept difference names a row of
// v2/README.md's table of differences from upstream.
func checkREADMERows(t *testing.T, list []kept) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(suite.Root, "v2", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(data), "## Differences from upstream")
	if !ok {
		t.Fatal("v2/README.md has no section of differences from upstream")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	for _, k := range list {
		if !strings.Contains(table, "\n| "+k.row+" |") {
			t.Errorf("the kept difference %s %s names the row %q, which v2/README.md's table of differences lacks", k.kind, where(k.path), k.row)
		}
	}
}

// snapshot holds the objects that make up the jobs of a namespace, each
// normalised (normalise), by "<kind>/<name>" (a generated name ends in
// "<generated>").
type snapshot map[string]any

// snapshotKinds are the jobs and the kinds of objects an MPIJob's
// operator makes, directly or through the launcher Job.
const snapshotKinds = takeoverKinds + ",mpijobs.kubeflow.org"

// takeSnapshot reads the MPIJobs of ns and the objects they or their
// launcher Jobs control.
func takeSnapshot(t *testing.T, ns string) snapshot {
	t.Helper()
	var list struct {
		Items []map[string]any `json:"items"`
	}
	mustDecode(t, &list, snapshotKinds, "-n", ns)
	n := normaliser{ns: regexp.MustCompile(`\b` + regexp.QuoteMeta(ns) + `\b`), uids: map[string]string{}}
	for _, o := range list.Items {
		meta, _ := o["metadata"].(map[string]any)
		if uid, _ := meta["uid"].(string); uid != "" {
			n.uids[uid] = fmt.Sprintf("<uid of %s/%s>", o["kind"], stableName(meta))
		}
	}
	snap := snapshot{}
	for _, o := range list.Items {
		if !ofJobs(o) {
			continue
		}
		meta, _ := o["metadata"].(map[string]any)
		snap[fmt.Sprintf("%s/%s", o["kind"], stableName(meta))] = n.object(o)
	}
	return snap
}

// ofJobs: an MPIJob, or an object that an MPIJob or a (launcher) Job
// controls.
func ofJobs(o map[string]any) bool {
	if o["kind"] == "MPIJob" {
		return true
	}
	meta, _ := o["metadata"].(map[string]any)
	refs, _ := meta["ownerReferences"].([]any)
	for _, r := range refs {
		ref, _ := r.(map[string]any)
		if ref["controller"] == true && (ref["kind"] == "MPIJob" || ref["kind"] == "Job") {
			return true
		}
	}
	return false
}

// stableName is the object's name, with the part the API server generates
// replaced.
func stableName(meta map[string]any) string {
	name, _ := meta["name"].(string)
	if prefix, _ := meta["generateName"].(string); prefix != "" && strings.HasPrefix(name, prefix) {
		return prefix + "<generated>"
	}
	return name
}

// normaliser replaces in an object what must differ between two
// namespaces and two runs.
type normaliser struct {
	ns   *regexp.Regexp    // the namespace's name, as a word
	uids map[string]string // the UIDs of the namespace's objects, and what replaces each
}

// object normalises o, an object as the API server returns it:
//   - metadata: namespace, uid, resourceVersion, creationTimestamp and
//     managedFields go; a generated name is made stable;
//   - every UID of an object of the namespace (owner references, the Job
//     controller's labels and selector) names its object instead;
//   - every RFC 3339 time is "<time>", the namespace's name "<ns>";
//   - the Secret's values are "<value>" (their keys stay), a pod's node is
//     "<node>", the ServiceAccount token volume's generated name is made
//     stable;
//   - the status of pods and of the launcher Job go: the kubelet (kwok)
//     and the Job controller write them, not the operators.
func (n normaliser) object(o map[string]any) any {
	kind := o["kind"]
	if meta, ok := o["metadata"].(map[string]any); ok {
		meta["name"] = stableName(meta)
		for _, f := range []string{"namespace", "uid", "resourceVersion", "creationTimestamp", "managedFields"} {
			delete(meta, f)
		}
	}
	switch kind {
	case "Pod", "Job":
		delete(o, "status")
	case "Secret":
		if data, ok := o["data"].(map[string]any); ok {
			for k := range data {
				data[k] = "<value>"
			}
		}
	}
	if kind == "Pod" {
		if spec, ok := o["spec"].(map[string]any); ok && spec["nodeName"] != nil {
			spec["nodeName"] = "<node>"
		}
	}
	return n.value(o)
}

func (n normaliser) value(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = n.value(e)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = n.value(e)
		}
		return v
	case string:
		if r, ok := n.uids[v]; ok {
			return r
		}
		if _, err := time.Parse(time.RFC3339, v); err == nil {
			return "<time>"
		}
		v = tokenVolumeName.ReplaceAllString(v, "kube-api-access-<generated>")
		return n.ns.ReplaceAllString(v, "<ns>")
	}
	return v
}

// tokenVolumeName is the name the ServiceAccount admission plugin gives
// the token volume it adds to every pod.
var tokenVolumeName = regexp.MustCompile(`^kube-api-access-[a-z0-9]+$`)

// compareSnapshots lists how each object of ours departs from upstream's
// of the same kind and name, and the objects either lacks.
func compareSnapshots(theirs, ours snapshot) []difference {
	var out []difference
	for _, key := range slices.Sorted(maps.Keys(theirs)) {
		o, ok := ours[key]
		if !ok {
			out = append(out, difference{object: key, what: "missing", theirs: "the object"})
			continue
		}
		compareValues(key, "", theirs[key], o, &out)
	}
	for _, key := range slices.Sorted(maps.Keys(ours)) {
		if _, ok := theirs[key]; !ok {
			// An object upstream's operator does not make is a difference
			// of its own, not a field added to one of upstream's.
			out = append(out, difference{object: key, what: "changed", theirs: nil, ours: "an object of ours only"})
		}
	}
	return out
}

// compareValues appends to out how ours departs from theirs at path.
func compareValues(object, path string, theirs, ours any, out *[]difference) {
	switch th := theirs.(type) {
	case map[string]any:
		o, ok := ours.(map[string]any)
		if !ok {
			*out = append(*out, difference{object, path, "changed", theirs, ours})
			return
		}
		for _, k := range slices.Sorted(maps.Keys(th)) {
			if v, ok := o[k]; ok {
				compareValues(object, path+"."+k, th[k], v, out)
			} else {
				*out = append(*out, difference{object, path + "." + k, "missing", th[k], nil})
			}
		}
		for _, k := range slices.Sorted(maps.Keys(o)) {
			if _, ok := th[k]; !ok {
				*out = append(*out, difference{object, path + "." + k, "added", nil, o[k]})
			}
		}
	case []any:
		o, ok := ours.([]any)
		if !ok {
			*out = append(*out, difference{object, path, "changed", theirs, ours})
			return
		}
		compareLists(object, path, th, o, out)
	default:
		if !reflect.DeepEqual(theirs, ours) {
			*out = append(*out, difference{object, path, "changed", theirs, ours})
		}
	}
}

// listKeys are the fields that identify the elements of a list of
// objects, in the order they are tried: conditions by type, containers,
// variables, volumes and owners by name, tolerations by key, mounts by
// path.
var listKeys = []string{"type", "name", "key", "mountPath", "containerPort"}

// compareLists matches the elements of two lists of objects by the first
// of listKeys that tells each list's elements apart, and others by index.
// Upstream's elements must keep their order in ours.
func compareLists(object, path string, theirs, ours []any, out *[]difference) {
	key := identity(theirs, ours)
	if key == "" {
		for i := range max(len(theirs), len(ours)) {
			at := fmt.Sprintf("%s[%d]", path, i)
			switch {
			case i >= len(ours):
				*out = append(*out, difference{object, at, "missing", theirs[i], nil})
			case i >= len(theirs):
				*out = append(*out, difference{object, at, "added", nil, ours[i]})
			default:
				compareValues(object, at, theirs[i], ours[i], out)
			}
		}
		return
	}
	byID := func(list []any) (map[string]any, []string) {
		m, order := map[string]any{}, []string(nil)
		for _, e := range list {
			id := fmt.Sprint(e.(map[string]any)[key])
			m[id] = e
			order = append(order, id)
		}
		return m, order
	}
	th, thOrder := byID(theirs)
	o, oOrder := byID(ours)
	for _, id := range thOrder {
		at := fmt.Sprintf("%s[%s=%s]", path, key, id)
		if e, ok := o[id]; ok {
			compareValues(object, at, th[id], e, out)
		} else {
			*out = append(*out, difference{object, at, "missing", th[id], nil})
		}
	}
	var common []string
	for _, id := range oOrder {
		if _, ok := th[id]; ok {
			common = append(common, id)
		} else {
			*out = append(*out, difference{object, fmt.Sprintf("%s[%s=%s]", path, key, id), "added", nil, o[id]})
		}
	}
	if kept := slices.DeleteFunc(slices.Clone(thOrder), func(id string) bool { _, ok := o[id]; return !ok }); !slices.Equal(kept, common) {
		*out = append(*out, difference{object, path, "order", thOrder, oOrder})
	}
}

// identity is the first of listKeys that every element of both lists, all
// objects, has, with values unique within each list; "" if none.
func identity(lists ...[]any) string {
	for _, key := range listKeys {
		ok := true
		for _, list := range lists {
			seen := map[string]bool{}
			for _, e := range list {
				m, isMap := e.(map[string]any)
				v, has := m[key]
				if !isMap || !has || seen[fmt.Sprint(v)] {
					ok = false
					break
				}
				seen[fmt.Sprint(v)] = true
			}
		}
		if ok && (len(lists[0]) > 0 || len(lists[1]) > 0) {
			return key
		}
	}
	return ""
}
