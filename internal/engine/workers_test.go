package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// TestWorkersStopAtFirstError: once a function fails, no later one runs,
// each of those is released instead, and wait returns the error.
func TestWorkersStopAtFirstError(t *testing.T) {
	boom := errors.New("boom")
	w := StartWorkers(context.Background(), 4)
	var ran, released atomic.Int64
	for i := range 100 {
		run := func() error {
			ran.Add(1)
			if i == 10 {
				return boom
			}
			return nil
		}
		w.Do(run, func() { released.Add(1) }) // released at once when the pass has failed
	}
	if err := w.Wait(); !errors.Is(err, boom) {
		t.Fatalf("wait: %v, want the first error", err)
	}
	if got := ran.Load() + released.Load(); got != 100 {
		t.Errorf("%d run and %d released of 100 handed: each must be one or the other", ran.Load(), released.Load())
	}
	if released.Load() == 0 {
		t.Errorf("all 100 ran although the 11th failed")
	}
}

// TestWorkersStopWhenCanceled: once ctx ends, nothing more runs and wait
// returns ctx's error.
func TestWorkersStopWhenCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	w := StartWorkers(ctx, 2)
	var ran atomic.Int64
	cancel()
	for range 10 {
		w.Do(func() error { ran.Add(1); return nil }, nil)
	}
	if err := w.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait: %v, want context.Canceled", err)
	}
	if ran.Load() != 0 {
		t.Errorf("%d ran after the context ended", ran.Load())
	}
}
