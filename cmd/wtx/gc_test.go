package main

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// TestPaceGC checks that the collector keeps Go's default pace while the
// live heap is small and holds the heap near it once more than bigHeap is
// live.
func TestPaceGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	paceGC()
	small := make([]byte, 1<<20)
	runtime.GC()
	time.Sleep(50 * time.Millisecond) // the watch runs on the runtime's cleanup goroutine
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("with %d bytes live the collector's percent is %d, want 100", len(small), got)
	}
	big := make([]byte, 2*bigHeap)
	for i := range big {
		big[i] = byte(i)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
		got := debug.SetGCPercent(-1)
		debug.SetGCPercent(got)
		if got == 25 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with %d bytes live the collector's percent is still %d, want 25", len(big), got)
		}
	}
	runtime.KeepAlive(small)
	runtime.KeepAlive(big)
}
