package engine

import "testing"

type sizedJob struct{ replicas int }

func TestResized(t *testing.T) {
	replicas := func(j *sizedJob) int { return j.replicas }
	cases := []struct {
		name     string
		old, new any
		want     bool
	}{
		{"replicas changed", &sizedJob{2}, &sizedJob{3}, true},
		{"replicas kept", &sizedJob{2}, &sizedJob{2}, false},
		{"not a job", "a tombstone", &sizedJob{3}, false},
		{"no job after", &sizedJob{2}, nil, false},
	}
	for _, tc := range cases {
		if got := Resized(tc.old, tc.new, replicas); got != tc.want {
			t.Errorf("%s: Resized = %v, want %v", tc.name, got, tc.want)
		}
	}
}
