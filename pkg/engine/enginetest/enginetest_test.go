package enginetest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
)

func TestWritesAndRuns(t *testing.T) {
	pods := corev1.SchemeGroupVersion.WithResource("pods")
	pod := func(name string) *corev1.Pod { return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	requests := []core.Action{
		core.NewGetAction(pods, "ns", "w-0"),
		core.NewCreateAction(pods, "ns", pod("w-1")),
		core.NewCreateAction(pods, "ns", pod("w-0")),
		core.NewUpdateSubresourceAction(pods, "status", "ns", pod("w-0")),
		core.NewPatchAction(pods, "ns", "launcher", types.MergePatchType, nil),
		core.NewDeleteAction(pods, "ns", "w-3"),
		core.NewDeleteAction(pods, "ns", "w-2"),
	}
	got := InRuns(Writes(requests), func(a Action) string { return a.Verb })
	want := []Action{
		Create("pods", "w-0"), Create("pods", "w-1"),
		{Verb: "update", Resource: "pods", Sub: "status", Name: "w-0"},
		PatchPod("launcher"),
		Delete("pods", "w-2"), Delete("pods", "w-3"),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("writes in runs (-want +got):\n%s", diff)
	}
	if s := want[2].String(); s != "update pods/status w-0" {
		t.Errorf("String() = %q", s)
	}
}
