package gang

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	volcanov1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

func TestMergeVolcano(t *testing.T) {
	group := func(spec volcanov1beta1.PodGroupSpec) *volcanov1beta1.PodGroup {
		return &volcanov1beta1.PodGroup{Spec: spec}
	}
	cpu := func(v string) *corev1.ResourceList {
		return &corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(v)}
	}
	cases := []struct {
		name            string
		cur, want, done *volcanov1beta1.PodGroup
		changed         bool
	}{
		{
			name: "unchanged; the namespace's queue stays",
			cur:  group(volcanov1beta1.PodGroupSpec{MinMember: 3, Queue: "team"}),
			want: group(volcanov1beta1.PodGroupSpec{MinMember: 3}),
			done: group(volcanov1beta1.PodGroupSpec{MinMember: 3, Queue: "team"}),
		},
		{
			name:    "the size follows the job",
			cur:     group(volcanov1beta1.PodGroupSpec{MinMember: 3, Queue: "team", PriorityClassName: "low"}),
			want:    group(volcanov1beta1.PodGroupSpec{MinMember: 5}),
			done:    group(volcanov1beta1.PodGroupSpec{MinMember: 5, Queue: "team", PriorityClassName: "low"}),
			changed: true,
		},
		{
			name:    "what the job sets wins",
			cur:     group(volcanov1beta1.PodGroupSpec{MinMember: 3, Queue: "team", PriorityClassName: "low", MinResources: cpu("1")}),
			want:    group(volcanov1beta1.PodGroupSpec{MinMember: 3, Queue: "gpu", PriorityClassName: "high", MinResources: cpu("4")}),
			done:    group(volcanov1beta1.PodGroupSpec{MinMember: 3, Queue: "gpu", PriorityClassName: "high", MinResources: cpu("4")}),
			changed: true,
		},
		{
			name: "quantities compare by value",
			cur:  group(volcanov1beta1.PodGroupSpec{MinMember: 3, MinResources: cpu("1000m")}),
			want: group(volcanov1beta1.PodGroupSpec{MinMember: 3, MinResources: cpu("1")}),
			done: group(volcanov1beta1.PodGroupSpec{MinMember: 3, MinResources: cpu("1")}),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.cur.DeepCopy()
			got, changed := MergeVolcano(tc.cur, tc.want)
			if changed != tc.changed {
				t.Errorf("changed = %v, want %v", changed, tc.changed)
			}
			if diff := cmp.Diff(tc.done.Spec, got.Spec, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
				t.Errorf("merged (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.cur); diff != "" {
				t.Errorf("cur modified:\n%s", diff)
			}
		})
	}
}
