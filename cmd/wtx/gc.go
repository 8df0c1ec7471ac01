package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// bigHeap is the live heap past which the collector keeps the heap near
// it (see paceGC).
const bigHeap = 32 << 20

// paceGC paces the collector by the size of what is live. While the live
// heap is small (most commands: a status, one step of an agent) the heap
// may double between collections, Go's default, and a short command
// collects a few times at most. Once a collection finds more than bigHeap
// live (a large change set, a large tree's manifest), the heap may grow
// only a quarter past it: wtx's data is many small records whose peak it
// keeps for the whole command, and a heap doubling past it doubles the
// command's memory. A memory limit would do worse: once the live heap
// nears it the collector runs without pause (a 20,000-file apply under a
// 48 MiB limit collected 1,300 times and spent 13 s of CPU doing so).
func paceGC() {
	watchCollections(func() bool {
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(s)
		if s[0].Value.Kind() == metrics.KindUint64 && s[0].Value.Uint64() > bigHeap {
			debug.SetGCPercent(25)
			return false
		}
		return true
	})
}

// watchCollections calls after once after each garbage collection, on a
// goroutine of the runtime's, for as long as it returns true.
func watchCollections(after func() bool) {
	type sentinel struct{ _ [16]byte } // not zero-sized: those may never be freed
	s := new(sentinel)
	runtime.AddCleanup(s, func(struct{}) {
		if after() {
			watchCollections(after)
		}
	}, struct{}{})
}
