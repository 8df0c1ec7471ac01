package fsx

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// eachResolver runs fn once with openat2 and once with the component walk.
func eachResolver(t *testing.T, fn func(t *testing.T)) {
	t.Helper()
	for _, walk := range []bool{false, true} {
		name := "openat2"
		if walk {
			name = "walk"
		}
		t.Run(name, func(t *testing.T) {
			old := openat2Off.Load()
			openat2Off.Store(walk)
			defer openat2Off.Store(old)
			fn(t)
		})
	}
}

// openFDs counts the descriptors open in this process.
func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	return len(entries)
}

// TestNoDescriptorLeak runs failing and succeeding lookups many times and
// checks that every descriptor opened on the way is closed.
func TestNoDescriptorLeak(t *testing.T) {
	eachResolver(t, func(t *testing.T) {
		f := newFixture(t)
		a := f.openDir(t, "a")
		if err := unix.Mkfifo(filepath.Join(f.dir, "a", "fifo"), 0o644); err != nil {
			t.Fatal(err)
		}
		before := openFDs(t)
		for range 50 {
			for _, rel := range []string{"a/b/c", "a/in/c", "a/out/sub", "a/b/file/x", "a/missing/c", "lastlink"} {
				if d, err := f.root.OpenDir(rel); err == nil {
					d.Close()
				}
			}
			f.root.Lstat("a/b/c/missing")
			a.OpenFile("fifo")
			a.OpenFile("in")
			a.Chmod("fifo", 0o600)
			a.ReadDir()
		}
		if after := openFDs(t); after != before {
			t.Errorf("open descriptors went from %d to %d", before, after)
		}
	})
}
