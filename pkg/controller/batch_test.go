package controller

import (
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestInBatches(t *testing.T) {
	errQuota := errors.New("quota")
	cases := []struct {
		name      string
		n, first  int
		fail      map[int]bool
		wantDone  []int
		wantCalls []int
		wantErr   bool
	}{
		{name: "nothing", n: 0, first: 1},
		{name: "all succeed", n: 5, first: 1, wantDone: []int{0, 1, 2, 3, 4}, wantCalls: []int{0, 1, 2, 3, 4}},
		{name: "first call fails: no more are sent", n: 5, first: 1, fail: map[int]bool{0: true},
			wantCalls: []int{0}, wantErr: true},
		{name: "a failure stops after its batch", n: 7, first: 1, fail: map[int]bool{1: true},
			wantDone: []int{0, 2}, wantCalls: []int{0, 1, 2}, wantErr: true},
		{name: "all at once", n: 3, first: 3, fail: map[int]bool{2: true},
			wantDone: []int{0, 1}, wantCalls: []int{0, 1, 2}, wantErr: true},
		{name: "batches never exceed maxBatch", n: 40, first: 100, fail: map[int]bool{maxBatch: true},
			wantDone: append(seq(0, maxBatch), seq(maxBatch+1, 2*maxBatch)...), wantCalls: seq(0, 2*maxBatch), wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var calls []int
			done, err := inBatches(tc.n, tc.first, func(i int) error {
				mu.Lock()
				calls = append(calls, i)
				mu.Unlock()
				if tc.fail[i] {
					return errQuota
				}
				return nil
			})
			if (err != nil) != tc.wantErr || (err != nil && !errors.Is(err, errQuota)) {
				t.Errorf("err = %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantDone, done, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("succeeded (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCalls, calls, cmpopts.EquateEmpty(), cmpopts.SortSlices(func(a, b int) bool { return a < b })); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

func seq(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}
