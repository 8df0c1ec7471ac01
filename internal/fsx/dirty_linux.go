package fsx

import (
	"bytes"
	"os"
	"strconv"

	"github.com/wtx-dev/wtx/internal/failpoint"
)

// Thresholds of BulkSync: one syncfs pays while the page cache holds less
// dirty data than bulkBase plus bulkPerFile for each file to make durable.
const (
	bulkBase    = 64 << 20
	bulkPerFile = 64 << 10
)

// BulkSync reports whether one syncfs of their filesystem is the cheaper
// way to make n files or directories durable, rather than an fsync of
// each. syncfs writes back everything dirty on the filesystem, so its cost
// is the whole page cache's dirty data: a few milliseconds when little
// else is writing, seconds when a build or a download has left a gigabyte
// behind. An fsync waits for its own file and the journal commit it joins;
// a batch of them in parallel costs a fraction of a millisecond a file
// whatever else is dirty. The dirty data is the system's (Dirty and
// Writeback of /proc/meminfo): data dirty on another filesystem makes it
// choose the fsyncs, which are then merely slower than they had to be.
//
// WTX_DISABLE=syncfs (failpoint builds) makes it always false, so the
// crash harnesses can prove the per-file path as well.
func BulkSync(n int) bool {
	if failpoint.Disabled("syncfs") {
		return false
	}
	dirty, ok := dirtyBytes()
	return !ok || dirty <= bulkBase+int64(n)*bulkPerFile
}

// dirtyBytes is the page cache's data waiting for or under writeback.
func dirtyBytes() (int64, bool) {
	raw, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	return parseDirty(raw)
}

// parseDirty sums Dirty and Writeback of /proc/meminfo's text; ok is false
// unless both are there, in kB.
func parseDirty(raw []byte) (int64, bool) {
	var total int64
	found := 0
	for line := range bytes.Lines(raw) {
		name, rest, ok := bytes.Cut(line, []byte(":"))
		if !ok || (string(name) != "Dirty" && string(name) != "Writeback") {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0, false
		}
		total += kb << 10
		found++
	}
	if found != 2 {
		return 0, false
	}
	return total, true
}
