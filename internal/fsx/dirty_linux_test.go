package fsx

import (
	"os"
	"testing"
)

func TestParseDirty(t *testing.T) {
	for _, c := range []struct {
		text string
		want int64
		ok   bool
	}{
		{"MemTotal:       24000000 kB\nDirty:             17404 kB\nWriteback:           12 kB\nAnonPages: 1 kB\n", (17404 + 12) << 10, true},
		{"Writeback: 0 kB\nDirty: 1 kB\n", 1 << 10, true},
		{"Dirty: 1 kB\n", 0, false},                               // no Writeback
		{"Dirty: 1 MB\nWriteback: 0 kB\n", 0, false},              // not kB
		{"Dirty: x kB\nWriteback: 0 kB\n", 0, false},              // not a number
		{"Dirty:\nWriteback: 0 kB\n", 0, false},                   // no value
		{"DirtyX: 5 kB\nWriteback: 0 kB\n", 0, false},             // another name
		{"MemTotal: 1 kB\nDirty: 0 kB\nWriteback: 0 kB", 0, true}, // no final newline
	} {
		got, ok := parseDirty([]byte(c.text))
		if got != c.want || ok != c.ok {
			t.Errorf("parseDirty(%q) = %d, %v; want %d, %v", c.text, got, ok, c.want, c.ok)
		}
	}
}

// TestBulkSyncFollowsDirtyData writes more dirty data than BulkSync
// allows for one file and checks it then chooses the fsyncs; with the
// data gone, one file is back under the threshold.
func TestBulkSyncFollowsDirtyData(t *testing.T) {
	if _, ok := dirtyBytes(); !ok {
		t.Skip("no Dirty and Writeback in /proc/meminfo")
	}
	dir := t.TempDir()
	f, err := os.Create(dir + "/dirty")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	// Written well past the threshold, so that writeback cannot keep
	// the dirty data under it while the test looks.
	for range (bulkBase + bulkPerFile) >> 20 * 3 {
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	// Each side is checked only well clear of the threshold, as the
	// dirty data may change between two reads.
	d, _ := dirtyBytes()
	if d > 2*(bulkBase+bulkPerFile) && BulkSync(1) {
		t.Errorf("with %d bytes dirty BulkSync(1) chose syncfs", d)
	}
	if d <= 2*(bulkBase+bulkPerFile) {
		t.Logf("writeback kept up (%d bytes dirty): only the other side is checked", d)
	}
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if d, _ := dirtyBytes(); d <= bulkBase/2 && !BulkSync(1) {
		t.Errorf("with %d bytes dirty BulkSync(1) chose the fsyncs", d)
	}
	if !BulkSync(1 << 40 / bulkPerFile) {
		t.Error("a batch whose allowance exceeds any page cache chose the fsyncs")
	}
}
