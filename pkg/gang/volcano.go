package gang

import (
	"k8s.io/apimachinery/pkg/api/equality"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

// MergeVolcano takes from want the fields of a volcano PodGroup that the
// job decides: minMember always, and the queue, priority class and minimum
// resources only where the job's scheduling policy sets them. What it
// leaves unset stays as volcano or an admin set it: volcano fills in the
// namespace's queue, and overwriting that would move the job out of its
// queue and quota. It reports whether the result differs from cur, and
// never modifies cur.
func MergeVolcano(cur, want *volcanov1beta1.PodGroup) (*volcanov1beta1.PodGroup, bool) {
	merged := cur.DeepCopy()
	merged.Spec.MinMember = want.Spec.MinMember
	if want.Spec.Queue != "" {
		merged.Spec.Queue = want.Spec.Queue
	}
	if want.Spec.PriorityClassName != "" {
		merged.Spec.PriorityClassName = want.Spec.PriorityClassName
	}
	if want.Spec.MinResources != nil {
		res := want.Spec.MinResources.DeepCopy()
		merged.Spec.MinResources = &res
	}
	return merged, !equality.Semantic.DeepEqual(cur.Spec, merged.Spec)
}
