package mpi

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestHostSlots(t *testing.T) {
	cases := []struct {
		name      string
		text      string
		wantHosts []string
		wantSlots map[string]int
		wantErr   bool
	}{
		{
			name:      "hostfile",
			text:      "j-worker-0 slots=2\nj-worker-1 slots=2\n",
			wantHosts: []string{"j-worker-0", "j-worker-1"},
			wantSlots: map[string]int{"j-worker-0": 2, "j-worker-1": 2},
		},
		{
			name:      "discover_hosts.sh output, launcher first",
			text:      "j-launcher:1\nj-worker-0:1\n",
			wantHosts: []string{"j-launcher", "j-worker-0"},
			wantSlots: map[string]int{"j-launcher": 1, "j-worker-0": 1},
		},
		{name: "empty", text: "\n", wantSlots: map[string]int{}},
		{name: "no slots", text: "j-worker-0\n", wantErr: true},
		{name: "slots not a number", text: "j-worker-0:two\n", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hosts, slots, err := hostSlots(tc.text)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want an error: %t", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if diff := cmp.Diff(tc.wantHosts, hosts); diff != "" {
				t.Errorf("hosts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantSlots, slots); diff != "" {
				t.Errorf("slots (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSummary(t *testing.T) {
	twoByTwo := map[string]int{"w-0": 2, "w-1": 2}
	cases := []struct {
		name  string
		out   string
		slots map[string]int
		want  bool // whether the run matches the slots
	}{
		{
			name:  "correct, with other lines",
			out:   "Warning: something\nrank=1 size=4 pod=w-0 sum=10\nrank=0 size=4 pod=w-0 sum=10\nrank=3 size=4 pod=w-1 sum=10\nrank=2 size=4 pod=w-1 sum=10\n",
			slots: twoByTwo,
			want:  true,
		},
		{
			name:  "wrong sum",
			out:   "rank=0 size=4 pod=w-0 sum=10\nrank=1 size=4 pod=w-0 sum=10\nrank=2 size=4 pod=w-1 sum=10\nrank=3 size=4 pod=w-1 sum=9\n",
			slots: twoByTwo,
		},
		{
			name:  "three ranks on one pod",
			out:   "rank=0 size=4 pod=w-0 sum=10\nrank=1 size=4 pod=w-0 sum=10\nrank=2 size=4 pod=w-0 sum=10\nrank=3 size=4 pod=w-1 sum=10\n",
			slots: twoByTwo,
		},
		{
			name:  "a rank twice, one missing",
			out:   "rank=0 size=4 pod=w-0 sum=10\nrank=1 size=4 pod=w-0 sum=10\nrank=2 size=4 pod=w-1 sum=10\nrank=2 size=4 pod=w-1 sum=10\n",
			slots: twoByTwo,
		},
		{
			name:  "a rank missing",
			out:   "rank=0 size=4 pod=w-0 sum=10\nrank=1 size=4 pod=w-0 sum=10\nrank=2 size=4 pod=w-1 sum=10\n",
			slots: twoByTwo,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ranks, err := parseRanks(tc.out)
			if err != nil {
				t.Fatal(err)
			}
			diff := cmp.Diff(expected(tc.slots), summarise(ranks))
			if got := diff == ""; got != tc.want {
				t.Errorf("matches = %t, want %t; diff (-want +got):\n%s", got, tc.want, diff)
			}
		})
	}
	if _, err := parseRanks("rank=x size=4 pod=w-0 sum=10\n"); err == nil {
		t.Errorf("parseRanks accepted a malformed rank line")
	}
}
