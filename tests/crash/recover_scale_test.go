package crash

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// recoverFiles is the size of the interrupted op of the recovery-scale
// test: large enough that reading the directory once per record (n reads
// of n entries) stands far above the bound, small enough to stay quick.
const recoverFiles = 1000

// recoverReadBound is how many directory reads a recovery of an op whose
// paths share one directory may make: a few per directory, never one per
// record.
const recoverReadBound = 20

// TestRecoveryReadsEachDirectoryOnce kills an undo of recoverFiles
// modified files in one directory (mid-way through its steps, and once
// past its commit), and counts the directory reads (WTX_TALLY) of the next
// command's recovery: a handful, not one per file. A recovery killed
// half-way starts again within the same bound and finishes the rollback.
// The negative control WTX_DISABLE=recover-index (a directory listing per
// record, as recovery once did) must exceed the bound.
func TestRecoveryReadsEachDirectoryOnce(t *testing.T) {
	f := newFixedFixture(t, func(ws string) {
		for i := range recoverFiles {
			mustDo(t, os.WriteFile(filepath.Join(ws, fmt.Sprintf("f%05d", i)), []byte("old\n"), 0o644))
		}
	}, "for f in f*; do echo new > \"$f\"; done\n")
	op := applied(t, f)
	f.save()
	names, r := f.points(nil, "undo", op)
	if r.code != 0 || f.snapshot() != f.before {
		t.Fatalf("uncrashed undo: %v", r)
	}
	// nth returns the point number of the n-th hit of name.
	nth := func(names []string, name string, n int) int {
		for k, got := range names {
			if got == name {
				if n--; n == 0 {
					return k + 1
				}
			}
		}
		t.Fatalf("fewer than the wanted hits of %s in %d points", name, len(names))
		return 0
	}
	reads := func(label string, env []string, want string) (int, []string) {
		t.Helper()
		tally := filepath.Join(f.dir, "tally")
		_ = os.Remove(tally) // absent the first time
		cnt := filepath.Join(f.dir, "count")
		_ = os.Remove(cnt) // absent the first time
		r := f.wtx(append(env, "WTX_TALLY="+tally, "WTX_FAILPOINT_COUNT="+cnt), "log")
		if r.code != 0 {
			t.Fatalf("%s: recovery: %v", label, r)
		}
		if v := f.settled(label, want); len(v) > 0 {
			t.Fatalf("%s", strings.Join(v, "\n"))
		}
		data, err := os.ReadFile(tally)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		pts, err := os.ReadFile(cnt)
		if err != nil {
			t.Fatal(err)
		}
		var hits []string
		for _, line := range strings.Split(strings.TrimSpace(string(pts)), "\n") {
			if _, name, ok := strings.Cut(line, " "); ok {
				hits = append(hits, name)
			}
		}
		return strings.Count(string(data), "readdir\n"), hits
	}

	// Killed once committed: recovery rolls the undo forward.
	f.restore()
	if r := f.wtx(fp(nth(names, "apply:cleanup", 1)), "undo", op); !r.killed {
		t.Fatalf("undo was not killed at its first cleanup: %v", r)
	}
	if n, _ := reads("roll forward", nil, f.before); n > recoverReadBound {
		t.Errorf("rolling forward an undo of %d files read the directory %d times (bound %d)", recoverFiles, n, recoverReadBound)
	}

	// Killed half-way through its steps: recovery rolls the undo back.
	f.restore()
	if r := f.wtx(fp(nth(names, "apply:step", recoverFiles/2)), "undo", op); !r.killed {
		t.Fatalf("undo was not killed half-way: %v", r)
	}
	f.save()
	n, hits := reads("roll back", nil, f.after)
	if n > recoverReadBound {
		t.Errorf("rolling back an undo of %d files read the directory %d times (bound %d)", recoverFiles, n, recoverReadBound)
	}
	t.Logf("rollback of an undo killed half-way through %d files: %d directory reads", recoverFiles, n)

	// The recovery itself killed half-way: the next one starts again
	// within the same bound and finishes.
	f.restore()
	undone := strings.Count(strings.Join(hits, "\n"), "recover:undone")
	if undone < recoverFiles/2 {
		t.Fatalf("recovery hit recover:undone %d times, want at least %d", undone, recoverFiles/2)
	}
	if r := f.wtx(fp(nth(hits, "recover:undone", undone/2)), "log"); !r.killed {
		t.Fatalf("recovery was not killed half-way: %v", r)
	}
	if n, _ := reads("roll back after a killed recovery", nil, f.after); n > recoverReadBound {
		t.Errorf("a restarted recovery read the directory %d times (bound %d)", n, recoverReadBound)
	}

	// Negative control: a listing per record exceeds the bound.
	f.restore()
	if n, _ := reads("roll back, recover-index disabled", []string{"WTX_DISABLE=recover-index"}, f.after); n <= recoverReadBound {
		t.Errorf("negative control: with recover-index disabled the rollback read the directory only %d times: the count does not see a listing per record", n)
	}
}

// TestInterruptedRecoveryKeepsItsJournal interrupts (SIGINT) a command
// while opening the workspace rolls back an undo a crash cut short: wtx
// exits 130 saying the recovery was interrupted and will be finished — not
// that the workspace is unchanged, which is untrue part-way through a
// rollback — and the next command finishes it: the workspace ends wholly
// as it was before the undo.
func TestInterruptedRecoveryKeepsItsJournal(t *testing.T) {
	f := newFixedFixture(t, func(ws string) {
		for i := range recoverFiles {
			mustDo(t, os.WriteFile(filepath.Join(ws, fmt.Sprintf("f%05d", i)), []byte("old\n"), 0o644))
		}
	}, "for f in f*; do echo new > \"$f\"; done\n")
	op := applied(t, f)
	f.save()
	names, r := f.points(nil, "undo", op)
	if r.code != 0 || f.snapshot() != f.before {
		t.Fatalf("uncrashed undo: %v", r)
	}
	f.restore()
	k := 0
	for i, n := range names {
		if n == "apply:step" {
			if k++; k == recoverFiles/2 {
				k = i + 1
				break
			}
		}
	}
	if r := f.wtx(fp(k), "undo", op); !r.killed {
		t.Fatalf("undo was not killed half-way: %v", r)
	}

	cnt := filepath.Join(f.dir, "count")
	_ = os.Remove(cnt) // left by points
	cmd := exec.Command(f.bin, "-C", f.ws, "log")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WTX_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "WTX_STATE_DIR="+f.st, "WTX_FAILPOINT_COUNT="+cnt, "WTX_FAILPOINT_PAUSE=recover:undone:20ms")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	mustDo(t, cmd.Start())
	deadline := time.Now().Add(wtxtest.Patience(t))
	for {
		data, _ := os.ReadFile(cnt) // absent until the first point
		if strings.Count(string(data), "recover:undone") >= 3 {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill() // the test has failed; do not leave it running
			t.Fatalf("recovery did not start: %s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	mustDo(t, cmd.Process.Signal(syscall.SIGINT))
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("interrupted recovery: %v, want exit 130; stderr %q", err, stderr.String())
	}
	if msg := stderr.String(); !strings.Contains(msg, "interrupted while recovering an earlier interrupted apply") || strings.Contains(msg, "workspace is unchanged") {
		t.Fatalf("interrupted recovery said %q", msg)
	}
	if r := f.wtx(nil, "log"); r.code != 0 {
		t.Fatalf("recovery after the interrupt: %v", r)
	}
	if v := f.settled("after the interrupted recovery was finished", f.after); len(v) > 0 {
		t.Fatal(strings.Join(v, "\n"))
	}
}
