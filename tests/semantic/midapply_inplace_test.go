package semantic

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// inPlaceEditMidApply stages a rewrite of f, pauses the apply once its
// journal is written (env added), and meanwhile writes into f in place and
// puts its mtime back, as an editor that keeps the file's size could. It
// returns the apply's exit code and what f holds after it.
func inPlaceEditMidApply(t *testing.T, env ...string) (int, string) {
	t.Helper()
	ws, state := t.TempDir(), t.TempDir()
	f := filepath.Join(ws, "f")
	if err := os.WriteFile(f, []byte("base\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old, err := os.Stat(f)
	if err != nil {
		t.Fatal(err)
	}
	if r := runWtx(t, ws, state, "run", "--backend", "copy", "--name", "s", "--", "sh", "-c", "echo new > f"); r.code != 0 {
		t.Fatalf("wtx run: %v", r)
	}
	apply := exec.Command(wtxtest.Binary(t, true), "-C", ws, "apply", "s")
	hold, held := wtxtest.NewHold(t, "apply:journaled")
	apply.Env = append(append(append(os.Environ(), "WTX_STATE_DIR="+state), held...), env...)
	if err := apply.Start(); err != nil {
		t.Fatal(err)
	}
	hold.Wait(t, apply.Process)
	w, err := os.OpenFile(f, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt([]byte("EDIT\n"), 0); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := os.Chtimes(f, old.ModTime(), old.ModTime()); err != nil {
		t.Fatal(err)
	}
	hold.Release()
	code := 0
	if err := apply.Wait(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatal(err)
		}
		code = ee.ExitCode()
	}
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	return code, string(b)
}

// TestInPlaceEditMidApplyIsRefused: a file written into in place while an
// apply runs, with its size and mtime as the check saw them, still changed:
// its change time says so, and the apply is refused (exit 2) with the edit
// left as it is. With the compare-and-swap switched off
// (WTX_DISABLE=cas) the same edit is lost, which shows the test sees it.
func TestInPlaceEditMidApplyIsRefused(t *testing.T) {
	t.Parallel()
	code, got := inPlaceEditMidApply(t)
	if code != 2 || got != "EDIT\n" {
		t.Errorf("an in-place edit during the apply: exit %d, f = %q; want a refusal (2) and the edit kept", code, got)
	}
	code, got = inPlaceEditMidApply(t, "WTX_DISABLE=cas")
	if code != 0 || got != "new\n" {
		t.Errorf("negative control (cas off): exit %d, f = %q; want the apply to land over the edit", code, got)
	}
}

// TestNewDirectoryMovedOutMidLand: new files wait in a directory the apply
// made until they land together; if that directory is moved out of the
// workspace meanwhile, none of them is written into it under its name.
func TestNewDirectoryMovedOutMidLand(t *testing.T) {
	t.Parallel()
	ws, state, outside := t.TempDir(), t.TempDir(), t.TempDir()
	if r := runWtx(t, ws, state, "run", "--backend", "copy", "--name", "s", "--", "sh", "-c", "mkdir n; echo 1 > n/a; echo 2 > n/b; echo 3 > n/c"); r.code != 0 {
		t.Fatalf("wtx run: %v", r)
	}
	apply := exec.Command(wtxtest.Binary(t, true), "-C", ws, "apply", "s")
	hold, held := wtxtest.NewHold(t, "apply:landed")
	apply.Env = append(append(os.Environ(), "WTX_STATE_DIR="+state), held...)
	if err := apply.Start(); err != nil {
		t.Fatal(err)
	}
	hold.Wait(t, apply.Process) // the first landed; the apply stands there
	if _, err := os.Stat(filepath.Join(ws, "n", "a")); err != nil {
		_ = apply.Process.Kill() // the test fails here either way
		t.Fatalf("no new file landed: %v", err)
	}
	moved := filepath.Join(outside, "n")
	if err := os.Rename(filepath.Join(ws, "n"), moved); err != nil {
		t.Fatal(err)
	}
	hold.Release()
	if err := apply.Wait(); err == nil {
		t.Error("the apply succeeded while its new directory was moved out of the workspace")
	}
	for _, name := range []string{"b", "c"} {
		if _, err := os.Stat(filepath.Join(moved, name)); err == nil {
			t.Errorf("%s landed in the directory after it left the workspace", name)
		}
	}
}
