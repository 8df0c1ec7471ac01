//go:build linux

package hardening

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/fsx"
)

// TestSymlinkExchangeRace runs the fsx write path (resolve the parent,
// create a temporary file, rename it into place) while an adversary swaps
// the parent directory with a symlink to a directory outside the root with
// renameat2(RENAME_EXCHANGE) in a loop. Nothing may land outside. A naive
// writer (os.WriteFile on the joined path) in the same harness must escape
// at least once, or the harness proves nothing.
func TestSymlinkExchangeRace(t *testing.T) {
	attempts := 200_000
	if soak() {
		attempts = 2_000_000
	}
	top := t.TempDir()
	root, out := filepath.Join(top, "root"), filepath.Join(top, "outside")
	must(t, os.MkdirAll(filepath.Join(root, "p"), 0o755))
	must(t, os.Mkdir(out, 0o755))
	must(t, os.Symlink(out, filepath.Join(root, "pl")))
	rootfd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	must(t, err)
	defer unix.Close(rootfd)

	// race runs write attempts times on workers goroutines while the
	// adversary swaps, and returns the entries that escaped.
	race := func(attempts int, write func(i int)) []string {
		var stop atomic.Bool
		var swaps atomic.Int64
		done := make(chan struct{})
		go func() {
			defer close(done)
			for !stop.Load() {
				if unix.Renameat2(rootfd, "p", rootfd, "pl", unix.RENAME_EXCHANGE) == nil {
					swaps.Add(1)
				}
			}
		}()
		var wg sync.WaitGroup
		var next atomic.Int64
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1))
					if i > attempts {
						return
					}
					write(i)
				}
			}()
		}
		wg.Wait()
		stop.Store(true)
		<-done
		names, err := os.ReadDir(out)
		must(t, err)
		var esc []string
		for _, n := range names {
			esc = append(esc, n.Name())
			os.Remove(filepath.Join(out, n.Name()))
		}
		t.Logf("%d swaps", swaps.Load())
		return esc
	}

	r, err := fsx.OpenRoot(root)
	must(t, err)
	defer r.Close()
	start := time.Now()
	var landed atomic.Int64
	esc := race(attempts, func(i int) {
		d, err := r.OpenDir("p")
		if err != nil {
			return // the symlink stood there: refused
		}
		defer d.Close()
		f, tmp, err := d.CreateTemp(".wtx-tmp-")
		if err != nil {
			return
		}
		f.Close()
		name := fmt.Sprintf("f%d", i%64)
		if d.Rename(tmp, d, name) != nil {
			d.Unlink(tmp)
			return
		}
		landed.Add(1)
	})
	t.Logf("fsx writer: %d attempts, %d landed inside, %d escapes, %v", attempts, landed.Load(), len(esc), time.Since(start).Round(time.Millisecond))
	if len(esc) > 0 {
		t.Errorf("fsx writer escaped the root: %v", esc)
	}
	if landed.Load() == 0 {
		t.Errorf("no fsx write landed: the harness never let the writer through")
	}

	// Negative control: the same race against a plain path-based writer.
	start = time.Now()
	control := 0
	for round := 0; round < 10 && control == 0; round++ {
		control = len(race(attempts/10, func(i int) {
			os.WriteFile(filepath.Join(root, "p", fmt.Sprintf("c%d", i%64)), nil, 0o644)
		}))
	}
	t.Logf("naive control writer: %d escapes, %v", control, time.Since(start).Round(time.Millisecond))
	if control == 0 {
		t.Errorf("the naive control writer never escaped: the harness is broken")
	}
}
