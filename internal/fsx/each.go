package fsx

import (
	"sync"
	"sync/atomic"
)

// SyncInFlight is how many fsyncs a batch of them keeps in flight (see
// Each): they wait on the disk, not the processor, and a file system folds
// concurrent ones into fewer journal commits.
const SyncInFlight = 16

// Each runs fn(i) for every i in [0, n) on up to par goroutines (at least
// one) and returns the first error; once one call fails no later i is
// started. It is for system calls that wait on the disk, such as a batch of
// fsyncs, where more calls in flight than CPUs lets the file system fold
// them into fewer journal commits.
func Each(n, par int, fn func(i int) error) error {
	par = max(1, min(par, n))
	if par == 1 {
		for i := range n {
			if err := fn(i); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		next   atomic.Int64
		failed atomic.Bool
		once   sync.Once
		first  error
		wg     sync.WaitGroup
	)
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					failed.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	return first
}
