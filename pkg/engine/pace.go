package engine

import (
	"sync"
	"time"
)

// DefaultBytesPerSecond is the pace of each job's writes of its files and
// the objects beside them (the launcher's Role, a PodGroup), unless Pace
// says otherwise. Every write carries a whole object that grows with the
// workers: unpaced, a job whose workers turn Running a few at a time writes
// bytes quadratic in its workers, and a job whose replicas flap rewrites
// its largest objects, a ConfigMap and a Role of up to a megabyte each,
// once per flap. Paced, a job of a hundred workers waits a few milliseconds
// at most between writes, one of 5,000 about half a second, and its writes
// in between come together.
const DefaultBytesPerSecond = 1 << 20

// Pace keeps each job's writes of its files and the objects beside them to
// a byte rate: after a write of n bytes the job's next writes wait until n
// bytes have been paid for. A sync that finds its job unpaid changes none
// of those objects, and comes back once it is paid (Prepare); the cost is
// latency of that job alone, never safety, since a worker leaves the files
// before it is deleted and gets exec rights before it exists either way.
type Pace struct {
	// BytesPerSecond is the rate; zero means DefaultBytesPerSecond.
	BytesPerSecond int

	paid sync.Map // job key -> time.Time until which its writes are paid for
}

// Wait is how long the writes of key wait at now: zero once paid.
func (p *Pace) Wait(key string, now time.Time) time.Duration {
	if p == nil {
		return 0
	}
	v, ok := p.paid.Load(key)
	if !ok {
		return 0
	}
	return max(v.(time.Time).Sub(now), 0)
}

// Wrote records a write of bytes for key at now.
func (p *Pace) Wrote(key string, now time.Time, bytes int) {
	if p == nil || bytes <= 0 {
		return
	}
	rate := p.BytesPerSecond
	if rate <= 0 {
		rate = DefaultBytesPerSecond
	}
	from := now
	if v, ok := p.paid.Load(key); ok && v.(time.Time).After(now) {
		from = v.(time.Time) // a write made while unpaid adds to the debt
	}
	p.paid.Store(key, from.Add(time.Duration(bytes)*time.Second/time.Duration(rate)))
}

// Forget drops what is remembered of key, a job that is gone.
func (p *Pace) Forget(key string) { p.paid.Delete(key) }

// Holds tells whether a write of key is remembered.
func (p *Pace) Holds(key string) bool {
	_, ok := p.paid.Load(key)
	return ok
}
