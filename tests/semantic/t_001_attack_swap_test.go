package semantic

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// swapEnv is a workspace whose path runs through a directory that someone
// else may rename (base/u/a, as a parent another user owns), and a victim
// directory outside it with the workspace's own name.
type swapEnv struct {
	ws, victim, parent, state string
}

func newSwapEnv(t *testing.T) *swapEnv {
	t.Helper()
	base := t.TempDir()
	e := &swapEnv{ws: filepath.Join(base, "u", "a", "www"), victim: filepath.Join(base, "victim", "www"),
		parent: filepath.Join(base, "u"), state: filepath.Join(base, "state")}
	mustWrite(t, filepath.Join(e.ws, "index.html"), "base\n")
	mustWrite(t, filepath.Join(e.victim, "index.html"), "victim\n")
	return e
}

// swapDuring runs wtx (failpoint build) with args, pausing wherever it
// opens the workspace's root; in the first pause the directory a on the
// workspace's path is replaced by a symlink to the victim's parent, so
// that the same path now names the victim.
func (e *swapEnv) swapDuring(t *testing.T, env []string, args ...string) wtxResult {
	t.Helper()
	hits := filepath.Join(t.TempDir(), "hits")
	cmd := exec.Command(wtxtest.Binary(t, true), append([]string{"-C", e.ws}, args...)...)
	cmd.Env = append(append(os.Environ(), "WTX_STATE_DIR="+e.state,
		"WTX_FAILPOINT_PAUSE=workspace:open-root:700ms", "WTX_FAILPOINT_COUNT="+hits), env...)
	var out, errb lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	mustDo(t, cmd.Start())
	// The point is counted as it is hit, before its pause.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if got, _ := os.ReadFile(hits); strings.Contains(string(got), "workspace:open-root") {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill() // the test fails below
			t.Fatalf("wtx %v never opened the workspace's root: %s", args, errb.String())
		}
	}
	a := filepath.Join(e.parent, "a")
	mustDo(t, os.Rename(a, a+".real"))
	mustDo(t, os.Symlink(filepath.Dir(e.victim), a))
	_ = cmd.Wait() // the exit status is judged by the caller
	return wtxResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}

// TestT_001_AttackWorkspacePathSwapped checks T-001 when a directory on
// the workspace's path is swapped for a symlink while wtx runs: every
// opening of the workspace's root is checked against the directory Open
// found (device and inode), so apply and undo refuse (refusal.boundary)
// and the victim, a directory of the same name outside the workspace, is
// untouched. Before, each opening walked the path again: an apply as root
// created a file in the victim, an undo removed one there. Negative
// control (failpoint build, WTX_DISABLE=workspace-ident): the victim is
// written.
func TestT_001_AttackWorkspacePathSwapped(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		var env []string
		if control {
			env = []string{"WTX_DISABLE=workspace-ident"}
		}
		// apply: a file the stage adds lands in the victim.
		e := newSwapEnv(t)
		if r := runWtx(t, e.ws, e.state, "run", "--backend", "copy", "--name", "s", "--", "sh", "-c", "echo pwned > new.txt"); r.code != 0 {
			t.Fatalf("run: %v", r)
		}
		res := e.swapDuring(t, env, "apply", "s")
		_, err := os.Lstat(filepath.Join(e.victim, "new.txt"))
		judgeSwap(t, control, "apply", err == nil, res)

		// undo: a file the op added is removed from the victim.
		e = newSwapEnv(t)
		if r := runWtx(t, e.ws, e.state, "run", "--backend", "copy", "--", "sh", "-c", "echo pwned > new.txt"); r.code != 0 {
			t.Fatalf("run: %v", r)
		}
		if r := runWtx(t, e.ws, e.state, "apply"); r.code != 0 {
			t.Fatalf("apply: %v", r)
		}
		mustWrite(t, filepath.Join(e.victim, "new.txt"), "pwned\n")
		res = e.swapDuring(t, env, "undo")
		_, err = os.Lstat(filepath.Join(e.victim, "new.txt"))
		judgeSwap(t, control, "undo", err != nil, res)
	}
}

func judgeSwap(t *testing.T, control bool, what string, harmed bool, res wtxResult) {
	t.Helper()
	switch {
	case control && !harmed:
		t.Errorf("%s: with the identity unchecked the victim was not touched: the case cannot fail (%v)", what, res)
	case !control && harmed:
		t.Errorf("%s: wtx acted on a directory outside the workspace through the swapped path (%v)", what, res)
	case !control && res.code != 2:
		t.Errorf("%s: want refusal.boundary (exit 2), got %v", what, res)
	}
}
