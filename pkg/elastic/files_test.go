package elastic

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMergeFiles(t *testing.T) {
	cm := func(data, annotations map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "job-config", Annotations: annotations}, Data: data}
	}
	files := map[string]string{"discover_hosts.sh": "#!/bin/sh\necho w-0\n"}
	other := map[string]string{"discover_hosts.sh": "#!/bin/sh\n"}
	cases := []struct {
		name      string
		cur, want *corev1.ConfigMap
		merged    *corev1.ConfigMap
		changed   bool
	}{
		{
			name:   "same files and state",
			cur:    cm(files, map[string]string{AnnotationNextWorkerIndex: "3", "team": "a"}),
			want:   cm(files, map[string]string{AnnotationNextWorkerIndex: "3"}),
			merged: cm(files, map[string]string{AnnotationNextWorkerIndex: "3", "team": "a"}),
		},
		{
			name:    "new files keep foreign annotations",
			cur:     cm(other, map[string]string{"team": "a"}),
			want:    cm(files, nil),
			merged:  cm(files, map[string]string{"team": "a"}),
			changed: true,
		},
		{
			name:    "state set",
			cur:     cm(files, nil),
			want:    cm(files, map[string]string{AnnotationNextWorkerIndex: "4", AnnotationBelowMinSince: "2026-01-02T03:04:05Z"}),
			merged:  cm(files, map[string]string{AnnotationNextWorkerIndex: "4", AnnotationBelowMinSince: "2026-01-02T03:04:05Z"}),
			changed: true,
		},
		{
			name:   "a raise of the next index alone waits for the files",
			cur:    cm(files, map[string]string{AnnotationNextWorkerIndex: "3"}),
			want:   cm(files, map[string]string{AnnotationNextWorkerIndex: "5"}),
			merged: cm(files, map[string]string{AnnotationNextWorkerIndex: "3"}),
		},
		{
			name:    "the next index is recorded with new files",
			cur:     cm(other, map[string]string{AnnotationNextWorkerIndex: "3"}),
			want:    cm(files, map[string]string{AnnotationNextWorkerIndex: "5"}),
			merged:  cm(files, map[string]string{AnnotationNextWorkerIndex: "5"}),
			changed: true,
		},
		{
			name:    "state cleared",
			cur:     cm(files, map[string]string{AnnotationBelowMinSince: "2026-01-02T03:04:05Z", AnnotationNextWorkerIndex: "4"}),
			want:    cm(files, map[string]string{AnnotationNextWorkerIndex: "4"}),
			merged:  cm(files, map[string]string{AnnotationNextWorkerIndex: "4"}),
			changed: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.cur.DeepCopy()
			merged, changed := MergeFiles(tc.cur, tc.want)
			if changed != tc.changed {
				t.Errorf("changed = %v, want %v", changed, tc.changed)
			}
			if diff := cmp.Diff(tc.merged, merged); diff != "" {
				t.Errorf("merged (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.cur); diff != "" {
				t.Errorf("cur modified (-before +after):\n%s", diff)
			}
		})
	}
}

func TestParseDiscoverHosts(t *testing.T) {
	cases := []struct {
		name, script string
		want         map[string]bool
	}{
		{"v1 with slots", "#!/bin/sh\necho j-launcher:1\necho j-worker-10:2\necho j-worker-2:2\n",
			map[string]bool{"j-launcher": true, "j-worker-10": true, "j-worker-2": true}},
		{"blank lines", "#!/bin/sh\necho a-launcher:1\necho a-worker-10:2\n\necho a-worker-2:2\n",
			map[string]bool{"a-launcher": true, "a-worker-10": true, "a-worker-2": true}},
		{"v2beta1 host names", "#!/bin/sh\necho j-worker-0.j.ns.svc\n", map[string]bool{"j-worker-0.j.ns.svc": true}},
		{"quoted", "#!/bin/sh\necho \"j-worker-0:1\"\n", map[string]bool{"j-worker-0": true}},
		{"empty", "#!/bin/sh\n", map[string]bool{}},
	}
	for _, tc := range cases {
		if diff := cmp.Diff(tc.want, ParseDiscoverHosts(tc.script)); diff != "" {
			t.Errorf("%s: ParseDiscoverHosts (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestMergeElasticFiles(t *testing.T) {
	cm := func(hostfile, script string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "job-config"},
			Data: map[string]string{HostfileKey: hostfile, "discover_hosts.sh": script}}
	}
	const (
		one   = "w-0 slots=1\n"
		two   = "w-0 slots=1\nw-1 slots=1\n"
		other = "w-0 slots=1\nw-2 slots=1\n"
		s0    = "#!/bin/sh\necho w-0:1\n"
		s01   = "#!/bin/sh\necho w-0:1\necho w-1:1\n"
	)
	cases := []struct {
		name      string
		cur, want *corev1.ConfigMap
		merged    *corev1.ConfigMap
		changed   bool
	}{
		{name: "a hostfile that only gains a host waits", cur: cm(one, s0), want: cm(two, s0), merged: cm(one, s0)},
		{name: "it is written with the listing", cur: cm(one, s0), want: cm(two, s01), merged: cm(two, s01), changed: true},
		{name: "a hostfile that loses a host is written", cur: cm(two, s0), want: cm(one, s0), merged: cm(one, s0), changed: true},
		{name: "a hostfile that swaps a host is written", cur: cm(two, s0), want: cm(other, s0), merged: cm(other, s0), changed: true},
		{name: "Intel MPI's format", cur: cm("w-0:2\n", s0), want: cm("w-0:2\nw-1:2\n", s0), merged: cm("w-0:2\n", s0)},
		{name: "a slot change is written", cur: cm(one, s0), want: cm("w-0 slots=2\nw-1 slots=2\n", s0),
			merged: cm("w-0 slots=2\nw-1 slots=2\n", s0), changed: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.cur.DeepCopy()
			merged, changed := MergeElasticFiles(tc.cur, tc.want)
			if changed != tc.changed {
				t.Errorf("changed = %t, want %t", changed, tc.changed)
			}
			if diff := cmp.Diff(tc.merged, merged); diff != "" {
				t.Errorf("merged (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.cur); diff != "" {
				t.Errorf("cur was modified (-before +after):\n%s", diff)
			}
		})
	}
}
