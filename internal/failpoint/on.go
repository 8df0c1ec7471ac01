//go:build wtxfailpoint

package failpoint

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Enabled reports whether this build arms failpoints.
const Enabled = true

var (
	mu    sync.Mutex
	count int
)

// Hit crashes the process (SIGKILL, so no deferred cleanup runs) when the
// environment arms this point. With WTX_FAILPOINT_ACTION=shutdown:DIR it
// first shuts down DIR's filesystem without flushing its log, so that what
// was not yet durable is lost as in a power cut.
func Hit(name string) {
	mu.Lock()
	defer mu.Unlock()
	count++
	if f := os.Getenv("WTX_FAILPOINT_COUNT"); f != "" {
		if out, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
			fmt.Fprintf(out, "%d %s\n", count, name)
			out.Close()
		}
	}
	if p := os.Getenv("WTX_FAILPOINT_PAUSE"); p != "" {
		if i := strings.LastIndexByte(p, ':'); i > 0 && p[:i] == name {
			if dur, err := time.ParseDuration(p[i+1:]); err == nil {
				time.Sleep(dur)
			}
		}
	}
	hold(name)
	arm := os.Getenv("WTX_FAILPOINT")
	if arm == "" {
		return
	}
	if n, err := strconv.Atoi(arm); err == nil && n == count || arm == name {
		if dir, ok := strings.CutPrefix(os.Getenv("WTX_FAILPOINT_ACTION"), "shutdown:"); ok {
			if err := Shutdown(dir); err != nil {
				fmt.Fprintf(os.Stderr, "failpoint: %v\n", err)
			}
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}

// Disabled reports whether WTX_DISABLE (a comma-separated list) switches off
// protection, for the negative controls of the crash harnesses: "fsync"
// makes every wtx fsync a no-op, "journal" skips the write-ahead journal,
// "cas" skips the compare-and-swap check of an apply, "store-lock" the blob
// store lock (gc then sweeps what writers hold unrecorded); "confine-caps",
// "confine-drop", "confine-userns" and "confine-fds" switch off parts of a
// staged command's confinement (see internal/stage's confine_linux.go),
// "overlay-groups" the overlay's check for groups it cannot map; "busy"
// ignores the stage busy lock (L-001), "settled" lets drop rewrite an
// applied stage (L-004); "contain-freeze" lists a command's leftovers
// without stopping them first, "walk-gone" fails a walk on a name removed
// under it, "syncfs" makes wtx fsync each file and directory instead of
// syncing their filesystem (see fsx.BulkSync). Other switches are named
// where they are used.
func Disabled(protection string) bool {
	for _, p := range strings.Split(os.Getenv("WTX_DISABLE"), ",") {
		if p == protection {
			return true
		}
	}
	return false
}

// Tally appends name to the file WTX_TALLY names, if set: a test counts
// how often a command does an operation (a directory read) without
// making it a crash point (WTX_FAILPOINT=N numbers stay as they are).
func Tally(name string) {
	f := os.Getenv("WTX_TALLY")
	if f == "" {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	if out, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
		fmt.Fprintln(out, name)
		_ = out.Close() // a count for a test; a lost line shows as a lower count
	}
}

// hold stops at the point WTX_FAILPOINT_HOLD=name@DIR names: it makes
// DIR/reached, then waits until DIR/release exists, so that a test acts
// while the command stands at the point however slowly either runs.
func hold(name string) {
	point, dir, ok := strings.Cut(os.Getenv("WTX_FAILPOINT_HOLD"), "@")
	if !ok || point != name {
		return
	}
	if f, err := os.OpenFile(filepath.Join(dir, "reached"), os.O_WRONLY|os.O_CREATE, 0o600); err == nil {
		_ = f.Close() // the file's existence is the signal
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "release")); err == nil {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}
