package engine

import (
	"context"
	"runtime"
	"sync"
)

// maxWorkers bounds the goroutines of one parallel pass (writing temporary
// files, storing payloads): the work is in the kernel, creating files,
// and more than a few at once only queue on the file system's journal.
const maxWorkers = 8

// queuedJobs is how many jobs may wait for a worker; each may hold an open
// file.
const queuedJobs = 16

// Workers runs functions on a few goroutines. The first error (or the end
// of ctx) stops it: later functions are not run, their release is.
type Workers struct {
	ctx  context.Context
	work chan job
	wg   sync.WaitGroup
	mu   sync.Mutex
	err  error
}

// StartWorkers starts up to n goroutines (at most GOMAXPROCS and
// maxWorkers, at least one).
func StartWorkers(ctx context.Context, n int) *Workers {
	// A few jobs queue, so that the goroutine handing them over and the
	// workers seldom wait on each other (each wait is a futex call).
	w := &Workers{ctx: ctx, work: make(chan job, queuedJobs)}
	for range max(1, min(n, runtime.GOMAXPROCS(0), maxWorkers)) {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for j := range w.work {
				err := w.ctx.Err()
				if err != nil || w.failed() {
					if j.release != nil {
						j.release()
					}
					if err != nil {
						w.Fail(err)
					}
					continue // drained: the pass has failed
				}
				if err := j.run(); err != nil {
					w.Fail(err)
				}
			}
		}()
	}
	return w
}

// job is one function to run, and what to do instead when it is not run
// (release: nil, or free what run would have used).
type job struct {
	run     func() error
	release func()
}

// Do hands run to a goroutine. When the pass has failed it is not run:
// release is, and do reports false.
func (w *Workers) Do(run func() error, release func()) bool {
	if w.failed() {
		if release != nil {
			release()
		}
		return false
	}
	w.work <- job{run: run, release: release}
	return true
}

// Fail records err unless an error is recorded already.
func (w *Workers) Fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

func (w *Workers) failed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err != nil
}

// Wait waits for every function handed over and returns the first error.
func (w *Workers) Wait() error {
	close(w.work)
	w.wg.Wait()
	return w.err
}
