package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/util/wait"
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
		{name: "batches never exceed MaxBatch", n: 40, first: 100, fail: map[int]bool{MaxBatch: true},
			wantDone: append(seq(0, MaxBatch), seq(MaxBatch+1, 2*MaxBatch)...), wantCalls: seq(0, 2*MaxBatch), wantErr: true},
		{name: "a first below one starts with one", n: 4, first: 0, fail: map[int]bool{0: true},
			wantCalls: []int{0}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var calls []int
			done, err := InBatches(tc.n, tc.first, func(i int) error {
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

// TestInBatchesSlowStart checks the batches of a slow start: 1, 2, 4, 8,
// then MaxBatch calls. A call starts only once every call of the batches
// before it has finished, and the calls of one batch are all in flight at
// once: each waits for its siblings.
func TestInBatchesSlowStart(t *testing.T) {
	ends := []int{1, 3, 7, 15, 31, 47, 63, 64} // where each batch ends
	var started, finished atomic.Int64
	_, err := InBatches(64, 1, func(i int) error {
		defer finished.Add(1)
		b := sort.SearchInts(ends, i+1)
		begin := 0
		if b > 0 {
			begin = ends[b-1]
		}
		if f := finished.Load(); f < int64(begin) {
			return fmt.Errorf("call %d started with %d calls finished, want the %d of the batches before", i, f, begin)
		}
		started.Add(1)
		err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, wait.ForeverTestTimeout, true,
			func(context.Context) (bool, error) { return started.Load() >= int64(ends[b]), nil })
		if err != nil {
			return fmt.Errorf("call %d: the %d calls of its batch were not all in flight: %w", i, ends[b]-begin, err)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// TestInBatchesUntil: stop is asked before each batch but the first, and
// ends the calls there.
func TestInBatchesUntil(t *testing.T) {
	var calls atomic.Int64 // a batch calls in parallel
	asked := 0
	done, err := InBatchesUntil(20, 1, func() bool {
		asked++
		return calls.Load() >= 3
	}, func(int) error {
		calls.Add(1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Batches of 1 and 2, then stop.
	if want := []int{0, 1, 2}; !slices.Equal(done, want) || calls.Load() != 3 || asked != 2 {
		t.Errorf("done %v after %d calls and %d questions, want %v after 3 and 2", done, calls.Load(), asked, want)
	}
}

func TestConcurrently(t *testing.T) {
	errA, errB := errors.New("a"), errors.New("b")
	var ran atomic.Int64
	fn := func(err error) func() error {
		return func() error { ran.Add(1); return err }
	}
	err := Concurrently(fn(nil), fn(errA), fn(nil), fn(errB))
	if !errors.Is(err, errA) || !errors.Is(err, errB) {
		t.Errorf("err = %v, want both failures joined", err)
	}
	if n := ran.Load(); n != 4 {
		t.Errorf("%d functions ran, want every one despite the failures", n)
	}
	if err := Concurrently(); err != nil {
		t.Errorf("Concurrently() = %v, want nil", err)
	}
	if err := Concurrently(fn(nil), fn(nil)); err != nil {
		t.Errorf("err = %v, want nil", err)
	}
}

func seq(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}
