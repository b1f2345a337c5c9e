package engine

import (
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
)

// ConditionResizing is the type of the condition that is True while an
// elastic job's workers move to a new count, in both API versions.
const ConditionResizing = "Resizing"

// StatusChange compares status, a job's status about to be written, with
// old, the one the cache holds, for either API version: both are pointers
// to a JobStatus, whose JSON is alike in v1 and v2beta1. changed tells
// whether anything but lastReconcileTime differs; mayWait, whether only
// what StatusHold may hold differs: the replica counts and the Resizing
// condition. The comparison is of the JSON the API server would store, so
// an empty list and a missing one are the same, and times count to the
// second. Should either not convert, the change counts as one to write
// at once.
func StatusChange(old, status any) (changed, mayWait bool) {
	a, errA := statusFields(old)
	b, errB := statusFields(status)
	if errA != nil || errB != nil {
		return true, false
	}
	if reflect.DeepEqual(a, b) {
		return false, false
	}
	return true, reflect.DeepEqual(withoutBatched(a), withoutBatched(b))
}

// statusFields is the JSON form of a status without lastReconcileTime and
// without its empty fields.
func statusFields(status any) (map[string]any, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(status)
	if err != nil {
		return nil, err
	}
	delete(m, "lastReconcileTime")
	return pruned(m), nil
}

// pruned deletes, in place, the keys of m whose values are empty: null, an
// empty list or a map that is empty once pruned itself.
func pruned(m map[string]any) map[string]any {
	for k, v := range m {
		switch v := v.(type) {
		case nil:
			delete(m, k)
		case []any:
			if len(v) == 0 {
				delete(m, k)
			}
		case map[string]any:
			if len(pruned(v)) == 0 {
				delete(m, k)
			}
		}
	}
	return m
}

// withoutBatched drops from fields, in place, what may wait to be written:
// the replica counts and the Resizing condition, and then what is left
// empty.
func withoutBatched(fields map[string]any) map[string]any {
	replicas, _ := fields["replicaStatuses"].(map[string]any)
	for _, rs := range replicas {
		if rs, ok := rs.(map[string]any); ok {
			delete(rs, "active")
			delete(rs, "succeeded")
			delete(rs, "failed")
		}
	}
	if conds, ok := fields["conditions"].([]any); ok {
		kept := conds[:0:0]
		for _, c := range conds {
			if c, ok := c.(map[string]any); !ok || c["type"] != ConditionResizing {
				kept = append(kept, c)
			}
		}
		fields["conditions"] = kept
	}
	return pruned(fields)
}
