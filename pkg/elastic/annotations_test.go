package elastic

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestStateAnnotations(t *testing.T) {
	since := time.Date(2026, 3, 4, 5, 6, 7, 800, time.FixedZone("X", 3600))
	cases := []struct {
		name  string
		state State
		want  map[string]string
	}{
		{"nothing recorded", State{}, nil},
		{"next index", State{NextIndex: 12}, map[string]string{AnnotationNextWorkerIndex: "12"}},
		{"below the minimum, in UTC with its nanoseconds", State{BelowMinSince: since},
			map[string]string{AnnotationBelowMinSince: "2026-03-04T04:06:07.0000008Z"}},
		{"both", State{NextIndex: 1, BelowMinSince: since.Truncate(time.Second)},
			map[string]string{AnnotationNextWorkerIndex: "1", AnnotationBelowMinSince: "2026-03-04T04:06:07Z"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.state.Annotations()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Annotations (-want +got):\n%s", diff)
			}
			for k := range got {
				if !slices.Contains(StateAnnotations(), k) {
					t.Errorf("Annotations writes %s, which StateAnnotations does not name", k)
				}
			}
			if back := ParseState(got); !back.BelowMinSince.Equal(tc.state.BelowMinSince) || back.NextIndex != tc.state.NextIndex {
				t.Errorf("ParseState(Annotations()) = %+v, want %+v", back, tc.state)
			}
		})
	}
}

func TestParseState(t *testing.T) {
	cases := []struct {
		name        string
		annotations map[string]string
		want        State
	}{
		{"none", nil, State{}},
		{"other keys only", map[string]string{"a": "b"}, State{}},
		{"index", map[string]string{AnnotationNextWorkerIndex: "7"}, State{NextIndex: 7}},
		{"malformed index", map[string]string{AnnotationNextWorkerIndex: "07"}, State{}},
		{"negative index", map[string]string{AnnotationNextWorkerIndex: "-1"}, State{}},
		{"time", map[string]string{AnnotationBelowMinSince: "2026-03-04T05:06:07Z"}, State{BelowMinSince: testNow}},
		{"malformed time", map[string]string{AnnotationBelowMinSince: "yesterday"}, State{}},
	}
	for _, tc := range cases {
		if got := ParseState(tc.annotations); got.NextIndex != tc.want.NextIndex || !got.BelowMinSince.Equal(tc.want.BelowMinSince) {
			t.Errorf("%s: ParseState = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestParseIndex(t *testing.T) {
	cases := map[string]int{ // -1 for refused
		"0": 0, "7": 7, "10": 10, "123456": 123456,
		"": -1, "01": -1, "+1": -1, "-1": -1, "1a": -1, "a": -1, " 1": -1, "1.0": -1,
	}
	for in, want := range cases {
		got, ok := ParseIndex(in)
		if ok != (want >= 0) || ok && got != want {
			t.Errorf("ParseIndex(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
}

func TestHostsHash(t *testing.T) {
	a := HostsHash("#!/bin/sh\necho job-worker-0:1\n")
	if len(a) != 16 {
		t.Errorf("HostsHash length %d, want 16 hex characters: %q", len(a), a)
	}
	if a != HostsHash("#!/bin/sh\necho job-worker-0:1\n") {
		t.Error("HostsHash is not deterministic")
	}
	if a == HostsHash("#!/bin/sh\necho job-worker-1:1\n") {
		t.Error("HostsHash is the same for different scripts")
	}
	if strings.Trim(a, "0123456789abcdef") != "" {
		t.Errorf("HostsHash %q is not lower-case hex", a)
	}
}
