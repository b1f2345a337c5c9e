package reconcile

import (
	"slices"
	"sync"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

func TestJobMemoryForgetsEveryStore(t *testing.T) {
	var writes StatusWrites
	exp := NewExpectations(testingclock.NewFakePassiveClock(time.Time{}))
	m := JobMemory{&writes, exp}
	writes.Wrote("ns/a", "1")
	writes.Wrote("ns/b", "1")
	exp.ExpectCreate("ns/a", "a-worker-0")
	if got := len(m.Holding("ns/a")); got != 2 {
		t.Fatalf("%d stores hold ns/a, want 2", got)
	}
	m.Forget("ns/a")
	if got := m.Holding("ns/a"); len(got) != 0 {
		t.Errorf("%v still hold ns/a", got)
	}
	if !writes.Holds("ns/b") {
		t.Error("forgetting ns/a forgot ns/b")
	}
}

// Embedded is a struct a controller embeds, whose stores count as the
// controller's own.
type Embedded struct {
	Listed, Unlisted StatusWrites
}

func TestJobMemoryUnlisted(t *testing.T) {
	type owner struct {
		*Embedded
		listed    StatusWrites
		unlisted  StatusWrites
		pointer   *Expectations
		stray     *Expectations
		byKey     map[string]int
		anyKey    sync.Map
		unrelated int
	}
	clk := testingclock.NewFakePassiveClock(time.Time{})
	o := &owner{Embedded: &Embedded{}, pointer: NewExpectations(clk), stray: NewExpectations(clk), byKey: map[string]int{"ns/a": 1}, unrelated: 1}
	o.unlisted.Wrote("ns/a", "1")
	o.anyKey.Store("ns/a", 1)
	got := JobMemory{&o.listed, o.pointer, &o.Embedded.Listed}.Unlisted(o)
	if want := []string{"Unlisted", "unlisted", "stray", "byKey", "anyKey"}; !slices.Equal(got, want) {
		t.Errorf("Unlisted = %v, want %v", got, want)
	}
}
