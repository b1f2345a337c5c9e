package reconcile

import (
	"errors"
	"sync"
)

// MaxBatch bounds the requests one batch of InBatches sends at once.
const MaxBatch = 16

// InBatches calls fn(i) for every i in [0, n), in batches whose calls run in
// parallel: the first batch has first calls, each next one twice as many, up
// to MaxBatch. After a batch in which a call failed it stops, so that a
// request bound to fail (a quota, a webhook) is not sent n times. It returns
// the i whose call succeeded, ascending, and the errors of those that
// failed, joined. A first of MaxBatch or more sends every batch at full size,
// for requests unlikely to fail together, such as deletions.
func InBatches(n, first int, fn func(i int) error) ([]int, error) {
	return InBatchesUntil(n, first, nil, fn)
}

// InBatchesUntil is InBatches that also stops before a batch when stop,
// if set, returns true.
func InBatchesUntil(n, first int, stop func() bool, fn func(i int) error) ([]int, error) {
	done := make([]int, 0, n)
	size := max(min(first, MaxBatch), 1)
	for start := 0; start < n; {
		if start > 0 && stop != nil && stop() {
			break
		}
		batch := min(size, n-start)
		errs := runBatch(start, batch, fn)
		for j, err := range errs {
			if err == nil {
				done = append(done, start+j)
			}
		}
		if err := errors.Join(errs...); err != nil {
			return done, err
		}
		start += batch
		size = min(2*size, MaxBatch)
	}
	return done, nil
}

// runBatch calls fn(start+j) for every j in [0, size) in parallel and
// returns their errors by j.
func runBatch(start, size int, fn func(i int) error) []error {
	errs := make([]error, size)
	var wg sync.WaitGroup
	for j := range size {
		wg.Go(func() { errs[j] = fn(start + j) })
	}
	wg.Wait()
	return errs
}

// Concurrently runs fns in parallel and returns their errors, joined. Up to
// MaxBatch fns all run, whatever fails; more run as InBatches at full size
// runs them, and a failure stops the batches that follow its own.
func Concurrently(fns ...func() error) error {
	_, err := InBatches(len(fns), len(fns), func(i int) error { return fns[i]() })
	return err
}
