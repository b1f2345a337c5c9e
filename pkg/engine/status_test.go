package engine

import (
	"testing"
	"time"
)

func TestStatusHold(t *testing.T) {
	var h StatusHold
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if w := h.Wait("ns/a", now, false); w != 0 || h.Holds("ns/a") {
		t.Fatalf("a change that may not wait waits %v (holds %v)", w, h.Holds("ns/a"))
	}
	if w := h.Wait("ns/a", now, true); w != StatusBatchPeriod {
		t.Fatalf("first change that may wait: wait %v, want %v", w, StatusBatchPeriod)
	}
	if w := h.Wait("ns/a", now.Add(StatusBatchPeriod/4), true); w != StatusBatchPeriod*3/4 {
		t.Errorf("a later change restarted the wait: %v", w)
	}
	if w := h.Wait("ns/b", now.Add(StatusBatchPeriod/4), true); w != StatusBatchPeriod {
		t.Errorf("another job's wait counts from ns/a's: %v", w)
	}
	if w := h.Wait("ns/a", now.Add(StatusBatchPeriod), true); w != 0 {
		t.Errorf("due after the period: wait %v", w)
	}
	h.Forget("ns/a")
	if h.Holds("ns/a") || !h.Holds("ns/b") {
		t.Error("Forget did not end ns/a's wait alone")
	}
}

func TestStatusHoldWrite(t *testing.T) {
	var h StatusHold
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	writes := 0
	write := func() error { writes++; return nil }
	for _, step := range []struct {
		name             string
		at               time.Duration
		changed, mayWait bool
		wait             time.Duration
		writes           int
	}{
		{"unchanged", 0, false, false, 0, 0},
		{"a count changed", 0, true, true, StatusBatchPeriod, 0},
		{"still waiting", StatusBatchPeriod / 2, true, true, StatusBatchPeriod / 2, 0},
		{"due", StatusBatchPeriod, true, true, 0, 1},
		{"a count changed again", StatusBatchPeriod, true, true, StatusBatchPeriod, 1},
		{"a condition changed too", StatusBatchPeriod, true, false, 0, 2},
	} {
		wait, err := h.write("ns/a", now.Add(step.at), step.changed, step.mayWait, write)
		if err != nil || wait != step.wait || writes != step.writes {
			t.Errorf("%s: wait %v, %d writes, error %v; want wait %v, %d writes", step.name, wait, writes, err, step.wait, step.writes)
		}
	}
	if h.Holds("ns/a") {
		t.Error("the hold outlived the write")
	}
}
