// Package enginetest is what the sync tests of both operators' controllers
// check a sync's requests with, on the fake clientsets: the writes it sent,
// compared in the order it may send them in, and the events it recorded.
package enginetest

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

// Action is the part of a write request that tests check.
type Action struct{ Verb, Resource, Sub, Name string }

func (a Action) String() string {
	s := a.Verb + " " + a.Resource
	if a.Sub != "" {
		s += "/" + a.Sub
	}
	return s + " " + a.Name
}

// Create, Update, PatchPod and Delete are the writes of those verbs.
func Create(resource, name string) Action {
	return Action{Verb: "create", Resource: resource, Name: name}
}
func Update(resource, name string) Action {
	return Action{Verb: "update", Resource: resource, Name: name}
}
func PatchPod(name string) Action { return Action{Verb: "patch", Resource: "pods", Name: name} }
func Delete(resource, name string) Action {
	return Action{Verb: "delete", Resource: resource, Name: name}
}

// StatusUpdate is the status write of the MPIJob job.
func StatusUpdate(job string) Action {
	return Action{Verb: "update", Resource: "mpijobs", Sub: "status", Name: job}
}

// Writes are the write requests among the requests of one clientset or
// more, in order.
func Writes(requests ...[]core.Action) []Action {
	var out []Action
	for _, rs := range requests {
		for _, r := range rs {
			if a, ok := Of(r); ok {
				out = append(out, a)
			}
		}
	}
	return out
}

// Of is what a test checks of a request, if it is a write.
func Of(r core.Action) (Action, bool) {
	a := Action{Verb: r.GetVerb(), Resource: r.GetResource().Resource, Sub: r.GetSubresource()}
	switch r := r.(type) {
	case core.CreateAction: // updates too: they carry the object alike
		m, err := meta.Accessor(r.GetObject())
		if err != nil {
			return a, false
		}
		a.Name = m.GetName()
	case core.DeleteAction:
		a.Name = r.GetName()
	case core.PatchAction:
		a.Name = r.GetName()
	default:
		return a, false
	}
	return a, true
}

// InRuns sorts each run of consecutive writes that the controller may send
// in parallel, by name; run names the run a write belongs to, and
// consecutive writes that it names alike form one. The order between runs
// is kept, and so checked.
func InRuns(actions []Action, run func(Action) string) []Action {
	out := slices.Clone(actions)
	for start := 0; start < len(out); {
		end := start + 1
		for end < len(out) && run(out[end]) == run(out[start]) {
			end++
		}
		slices.SortFunc(out[start:end], func(x, y Action) int { return strings.Compare(x.String(), y.String()) })
		start = end
	}
	return out
}

// Events are the events r recorded since the last call, each "Type Reason
// Message".
func Events(r *record.FakeRecorder) []string {
	out := make([]string, 0, len(r.Events))
	for range len(r.Events) {
		out = append(out, <-r.Events)
	}
	return out
}
