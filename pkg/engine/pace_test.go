package engine

import (
	"context"
	"testing"
	"time"

	"github.com/kubeflow/mpi-operator/pkg/elastic"
)

func TestPaceWait(t *testing.T) {
	p := &Pace{BytesPerSecond: 1000}
	if w := p.Wait("ns/j", testNow); w != 0 {
		t.Errorf("a job that wrote nothing waits %s", w)
	}
	p.Wrote("ns/j", testNow, 500)
	if w := p.Wait("ns/j", testNow.Add(100*time.Millisecond)); w != 400*time.Millisecond {
		t.Errorf("100ms after a write of 500 bytes at 1000 B/s: wait %s, want 400ms", w)
	}
	if w := p.Wait("ns/other", testNow); w != 0 {
		t.Errorf("another job waits %s", w)
	}
	// A write made while unpaid adds to what is owed.
	p.Wrote("ns/j", testNow.Add(100*time.Millisecond), 1000)
	if w := p.Wait("ns/j", testNow.Add(100*time.Millisecond)); w != 1400*time.Millisecond {
		t.Errorf("after a second write of 1000 bytes: wait %s, want 1.4s", w)
	}
	if w := p.Wait("ns/j", testNow.Add(time.Minute)); w != 0 {
		t.Errorf("a minute later: wait %s", w)
	}
	p.Forget("ns/j")
	if p.Holds("ns/j") {
		t.Error("a forgotten job is still held")
	}
	var none *Pace
	none.Wrote("ns/j", testNow, 1<<30)
	if w := none.Wait("ns/j", testNow); w != 0 {
		t.Errorf("no pace: wait %s", w)
	}
	if w := (&Pace{}).waitAfter(DefaultBytesPerSecond); w != time.Second {
		t.Errorf("the default pace: a write of DefaultBytesPerSecond bytes waits %s, want 1s", w)
	}
}

// waitAfter is the wait right after one write of bytes.
func (p *Pace) waitAfter(bytes int) time.Duration {
	p.Wrote("probe", testNow, bytes)
	defer p.Forget("probe")
	return p.Wait("probe", testNow)
}

// TestUnpaidJobWritesNothing: a job whose last writes are not paid for
// changes neither its files nor the objects beside them; it then marks
// nothing, creates nothing without the exec rights written, and deletes
// only workers drained already; what needs no write goes on; the job comes
// back once paid.
func TestUnpaidJobWritesNothing(t *testing.T) {
	unpaid := func(t *testing.T, workers int) *actFixture {
		f := newActFixture(t, workers)
		f.engine.Pace = &Pace{BytesPerSecond: 1000}
		f.engine.Pace.Wrote("ns/j", testNow, 500)
		return f
	}
	drained := func(f *actFixture) {
		f.pods[2].Annotations = map[string]string{elastic.AnnotationDrainingSince: testNow.Add(-time.Minute).Format(time.RFC3339)}
	}
	t.Run("scale-in", func(t *testing.T) {
		f := unpaid(t, 3)
		drained(f)
		out, err := f.act(1)
		if err != nil {
			t.Fatal(err)
		}
		f.expectLog("files", "exec [j-worker-0 j-worker-1 j-worker-2]", "delete j-worker-2")
		if w := f.objectWrites(); len(w) != 0 {
			t.Errorf("objects written: %v", w)
		}
		if out.Held != 500*time.Millisecond || out.Requeue <= 0 || out.Requeue > out.Held || out.Written {
			t.Errorf("outcome %+v, want held 500ms, a requeue by then and nothing written", out)
		}
	})
	t.Run("scale-out", func(t *testing.T) {
		f := unpaid(t, 1)
		if _, err := f.act(3); err != nil {
			t.Fatal(err)
		}
		f.expectLog("files", "exec [j-worker-0 j-worker-1 j-worker-2]")
	})
	t.Run("scale-out with the exec rights in place", func(t *testing.T) {
		f := unpaid(t, 1)
		if err := f.ensure(context.Background(), "j-exec", "[j-worker-0 j-worker-1 j-worker-2]"); err != nil {
			t.Fatal(err)
		}
		f.engine.Pace.Wrote("ns/j", testNow, 500)
		f.client.ClearActions()
		out, err := f.act(3)
		if err != nil {
			t.Fatal(err)
		}
		f.expectLog("files", "exec [j-worker-0 j-worker-1 j-worker-2]", "create j-worker-1", "create j-worker-2")
		if w := f.objectWrites(); len(w) != 0 || out.Written || out.Held == 0 {
			t.Errorf("objects written %v, outcome %+v: want the files held and nothing written", w, out)
		}
	})
	t.Run("paid", func(t *testing.T) {
		f := newActFixture(t, 3)
		drained(f)
		f.engine.Pace = &Pace{BytesPerSecond: 1000}
		f.engine.Pace.Wrote("ns/j", testNow.Add(-time.Second), 500)
		out, err := f.act(1)
		if err != nil {
			t.Fatal(err)
		}
		f.expectLog("files", "exec [j-worker-0 j-worker-1 j-worker-2]", "tell", "patch j-worker-1", "delete j-worker-2")
		if out.Held != 0 || len(f.objectWrites()) != 2 {
			t.Errorf("held %s, objects written %v; want both written", out.Held, f.objectWrites())
		}
		if w := f.engine.Pace.Wait("ns/j", testNow); w <= 0 {
			t.Errorf("after writing, the job waits %s: the writes were not charged", w)
		}
	})
}
