package controller

import (
	"errors"
	"sync"
)

// maxBatch bounds the requests one batch sends at once.
const maxBatch = 16

// inBatches calls fn(i) for every i in [0, n), in batches whose calls run in
// parallel: the first batch has first calls, each next one twice as many, up
// to maxBatch. After a batch in which a call failed it stops, so that a
// request bound to fail (a quota, a webhook) is not sent n times. It returns
// the i whose call succeeded, ascending, and the errors of those that failed.
func inBatches(n, first int, fn func(i int) error) ([]int, error) {
	done := make([]int, 0, n)
	size := max(min(first, maxBatch), 1)
	for start := 0; start < n; {
		batch := min(size, n-start)
		errs := make([]error, batch)
		var wg sync.WaitGroup
		for j := range batch {
			wg.Go(func() { errs[j] = fn(start + j) })
		}
		wg.Wait()
		for j, err := range errs {
			if err == nil {
				done = append(done, start+j)
			}
		}
		if err := errors.Join(errs...); err != nil {
			return done, err
		}
		start += batch
		size = min(2*size, maxBatch)
	}
	return done, nil
}

// concurrently runs fns in parallel and returns their errors, joined.
func concurrently(fns ...func() error) error {
	_, err := inBatches(len(fns), len(fns), func(i int) error { return fns[i]() })
	return err
}
