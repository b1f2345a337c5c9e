package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestUnlisted(t *testing.T) {
	pods := func(names ...string) []*corev1.Pod {
		var out []*corev1.Pod
		for _, n := range names {
			out = append(out, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
		return out
	}
	for name, tc := range map[string]struct {
		victims []*corev1.Pod
		script  string
		want    []*corev1.Pod
	}{
		"v1, both unlisted":            {pods("j-worker-2", "j-worker-3"), "#!/bin/sh\necho j-worker-0:1\necho j-worker-1:1\n", pods("j-worker-2", "j-worker-3")},
		"v1, the write held back":      {pods("j-worker-2", "j-worker-3"), "#!/bin/sh\necho j-worker-0:1\necho j-worker-2:1\necho j-worker-3:1\n", nil},
		"v1, one of two listed":        {pods("j-worker-2", "j-worker-3"), "#!/bin/sh\necho j-worker-3:1\n", pods("j-worker-2")},
		"v2beta1, DNS names":           {pods("j-worker-1", "j-worker-2"), "#!/bin/sh\necho j-worker-0.j.ns.svc\necho j-worker-2.j.ns.svc\n", pods("j-worker-1")},
		"no victims":                   {nil, "#!/bin/sh\necho j-worker-0:1\n", nil},
		"a name that prefixes another": {pods("j-worker-1"), "#!/bin/sh\necho j-worker-10:1\n", pods("j-worker-1")},
	} {
		if diff := cmp.Diff(tc.want, Unlisted(tc.victims, tc.script)); diff != "" {
			t.Errorf("%s: Unlisted (-want +got):\n%s", name, diff)
		}
	}
}
