//go:build linux

package hardening

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// longWork is a workspace whose stage changes enough files that an apply
// paused at each step (WTX_FAILPOINT_PAUSE) runs long enough to be
// interrupted, or to show progress.
type longWork struct {
	t              *testing.T
	bin, ws, state string
	count          string // WTX_FAILPOINT_COUNT file
	tx, before     string // the stage, the workspace's snapshot before any apply
}

const longWorkFiles = 30

func newLongWork(t *testing.T) *longWork {
	t.Helper()
	top := t.TempDir()
	l := &longWork{t: t, bin: wtxtest.Binary(t, true), ws: filepath.Join(top, "ws"), state: filepath.Join(top, "state"),
		count: filepath.Join(top, "count")}
	must(t, os.MkdirAll(l.ws, 0o755))
	for i := range longWorkFiles {
		must(t, os.WriteFile(filepath.Join(l.ws, fmt.Sprintf("f%02d.txt", i)), []byte("old\n"), 0o644))
	}
	out, code := l.wtx(nil, "--json", "run", "--", "sh", "-c", `for f in *.txt; do echo new >> "$f"; done`)
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, out)
	}
	var a struct {
		Tx string `json:"tx"`
	}
	if err := json.Unmarshal([]byte(out), &a); err != nil || a.Tx == "" {
		t.Fatalf("run --json: %q: %v", out, err)
	}
	l.tx = a.Tx
	l.before = wtxtest.MustSnapshot(t, l.ws)
	return l
}

// wtx runs the binary to its end and returns stdout (and stderr after it)
// and the exit status.
func (l *longWork) wtx(env []string, args ...string) (string, int) {
	l.t.Helper()
	cmd := l.cmd(env, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		l.t.Fatal(err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

func (l *longWork) cmd(env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(l.bin, append([]string{"-C", l.ws}, args...)...)
	cmd.Env = append(append(os.Environ(), "WTX_STATE_DIR="+l.state), env...)
	return cmd
}

// interrupt starts wtx args paused at every hit of the failpoint pause,
// sends it SIGINT once the point hit was reached, and returns its stderr
// and exit status.
func (l *longWork) interrupt(pause, hit string, extra []string, args ...string) (string, int) {
	l.t.Helper()
	_ = os.Remove(l.count) // may not exist yet
	cmd := l.cmd(append([]string{"WTX_FAILPOINT_PAUSE=" + pause, "WTX_FAILPOINT_COUNT=" + l.count}, extra...), args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	must(l.t, cmd.Start())
	deadline := time.Now().Add(wtxtest.Patience(l.t))
	for {
		b, _ := os.ReadFile(l.count) // absent until the first point
		if strings.Count(string(b), " "+hit+"\n") >= 2 || (hit != "apply:step" && strings.Contains(string(b), " "+hit+"\n")) {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill() // the test has failed; do not leave it running
			l.t.Fatalf("wtx %v never reached %s; points hit:\n%s", args, hit, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	must(l.t, cmd.Process.Signal(syscall.SIGINT))
	err := cmd.Wait()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		l.t.Fatal(err)
	}
	return errb.String(), cmd.ProcessState.ExitCode()
}

// TestInterruptedApplyLeavesWorkspaceUnchanged: Ctrl-C (SIGINT to wtx)
// during an apply's steps rolls the apply back, says so and exits 130; the
// stage stays open and applies afterwards.
func TestInterruptedApplyLeavesWorkspaceUnchanged(t *testing.T) {
	l := newLongWork(t)
	stderr, code := l.interrupt("apply:step:50ms", "apply:step", nil, "apply", l.tx)
	if code != 130 || !strings.Contains(stderr, "wtx: interrupted; the workspace is unchanged") {
		t.Fatalf("interrupted apply: exit %d, stderr %q; want 130 and the workspace's state", code, stderr)
	}
	if got := wtxtest.MustSnapshot(t, l.ws); got != l.before {
		t.Fatalf("the workspace changed:\n%s\nwant:\n%s", got, l.before)
	}
	if d := wtxtest.Debris(l.ws); len(d) > 0 {
		t.Fatalf("left in the workspace: %q", d)
	}
	if out, code := l.wtx(nil, "apply", l.tx); code != 0 {
		t.Fatalf("apply after the interrupt: exit %d: %s", code, out)
	}
	b, err := os.ReadFile(filepath.Join(l.ws, "f07.txt"))
	must(t, err)
	if string(b) != "old\nnew\n" {
		t.Fatalf("f07.txt after the apply: %q", b)
	}
}

// TestInterruptedApplyPastCommitFinishes: SIGINT after the commit marker
// no longer stops the apply: it finishes, wtx says so and exits 130. The
// negative control (WTX_DISABLE=finish-after-commit) lets the interrupt
// stop the rest, and the report is then wrong.
func TestInterruptedApplyPastCommitFinishes(t *testing.T) {
	for _, negative := range []bool{false, true} {
		t.Run(fmt.Sprintf("negative=%v", negative), func(t *testing.T) {
			l := newLongWork(t)
			var extra []string
			if negative {
				extra = []string{"WTX_DISABLE=finish-after-commit"}
			}
			stderr, code := l.interrupt("apply:committed:500ms", "apply:committed", extra, "apply", l.tx)
			ok := code == 130 && strings.Contains(stderr, "passed its commit point; it finished") &&
				!strings.Contains(stderr, "unchanged")
			if negative {
				if ok {
					t.Fatalf("negative control: with the protection off the interrupt was still reported as finished: %q", stderr)
				}
				return
			}
			if !ok {
				t.Fatalf("interrupted after the commit marker: exit %d, stderr %q; want 130 and \"finished\"", code, stderr)
			}
			for i := range longWorkFiles {
				b, err := os.ReadFile(filepath.Join(l.ws, fmt.Sprintf("f%02d.txt", i)))
				must(t, err)
				if string(b) != "old\nnew\n" {
					t.Fatalf("f%02d.txt: %q; the apply did not finish", i, b)
				}
			}
			// Nothing was left for recovery: the op is recorded and the stage settled.
			if out, code := l.wtx(nil, "--json", "log"); code != 0 || !strings.Contains(out, `"op-`) {
				t.Fatalf("log after the interrupt: exit %d: %s", code, out)
			}
			if out, _ := l.wtx(nil, "apply", l.tx); strings.Contains(out, "interrupted") {
				t.Fatalf("a later command found an interrupted apply: %s", out)
			}
		})
	}
}

// TestInterruptedUndoLeavesWorkspaceUnchanged: Ctrl-C during an undo's
// steps (the case that once printed "put blob …: context canceled")
// rolls it back, says the workspace is unchanged and exits 130.
func TestInterruptedUndoLeavesWorkspaceUnchanged(t *testing.T) {
	l := newLongWork(t)
	out, code := l.wtx(nil, "apply", l.tx)
	if code != 0 {
		t.Fatalf("apply: exit %d: %s", code, out)
	}
	op := strings.Fields(out)[0]
	applied := wtxtest.MustSnapshot(t, l.ws)
	stderr, code := l.interrupt("apply:step:50ms", "apply:step", nil, "undo", op)
	if code != 130 || !strings.Contains(stderr, "wtx: interrupted; the workspace is unchanged") {
		t.Fatalf("interrupted undo: exit %d, stderr %q; want 130 and the workspace's state", code, stderr)
	}
	if got := wtxtest.MustSnapshot(t, l.ws); got != applied {
		t.Fatalf("the workspace changed:\n%s\nwant:\n%s", got, applied)
	}
	if out, code := l.wtx(nil, "undo", op); code != 0 {
		t.Fatalf("undo after the interrupt: exit %d: %s", code, out)
	}
	if got := wtxtest.MustSnapshot(t, l.ws); got != l.before {
		t.Fatal("the undo did not restore the workspace")
	}
}

// TestProgressOnATerminal: an apply that takes more than a second draws a
// progress line on a terminal stderr (a real pty), and none on a pipe or
// under --json.
func TestProgressOnATerminal(t *testing.T) {
	const pause = "apply:step:60ms" // 30 steps: about 1.8 s
	for _, c := range []struct {
		name     string
		tty      bool
		args     []string
		progress bool
	}{
		{"terminal", true, []string{"apply"}, true},
		{"pipe", false, []string{"apply"}, false},
		{"json on a terminal", true, []string{"--json", "apply"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLongWork(t)
			cmd := l.cmd([]string{"WTX_FAILPOINT_PAUSE=" + pause, "TERM=xterm"}, append(c.args, l.tx)...)
			var stderr bytes.Buffer
			var ptmx *os.File
			if c.tty {
				var tty *os.File
				var err error
				ptmx, tty, err = pty.Open()
				if err != nil {
					t.Skipf("no pseudo-terminal: %v", err)
				}
				defer ptmx.Close()
				cmd.Stderr = tty
				must(t, cmd.Start())
				tty.Close()
				done := make(chan struct{})
				go func() { // read until the child's side closes (EIO)
					defer close(done)
					_, _ = stderr.ReadFrom(ptmx) // EIO at the end is expected
				}()
				err = cmd.Wait()
				<-done
				if err != nil {
					t.Fatalf("apply: %v: %q", err, stderr.String())
				}
			} else {
				cmd.Stderr = &stderr
				if err := cmd.Run(); err != nil {
					t.Fatalf("apply: %v: %q", err, stderr.String())
				}
			}
			got := stderr.String()
			drawn := strings.Contains(got, "wtx: applying: writing ") && strings.Contains(got, "/30 (")
			if drawn != c.progress {
				t.Fatalf("progress line drawn: %v, want %v; stderr %q", drawn, c.progress, got)
			}
			if c.progress && !strings.Contains(got, "\r\x1b[K") {
				t.Fatalf("the progress line is not cleared: %q", got)
			}
		})
	}
}
