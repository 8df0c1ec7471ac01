//go:build linux

package semantic

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// overlayOrSkip skips a test of the overlay backend where it cannot run.
func overlayOrSkip(t *testing.T) {
	t.Helper()
	if reason := overlayUsable(t, wtxtest.Binary(t, false)); reason != "" {
		t.Skipf("overlay not usable here: %s", reason)
	}
}

// stageDir is the directory of the workspace's only stage in state.
func stageDir(t *testing.T, state string) string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(state, "stages", "tx-*"))
	if err != nil || len(dirs) != 1 {
		t.Fatalf("stage directories: %v %v", dirs, err)
	}
	return dirs[0]
}

// TestOverlayViewIsVolatile: the overlay a command runs in is mounted
// volatile, so that its unmount does not flush every other program's
// unwritten data on the file system (what the command wrote is synced by
// wtx itself). The command reads its own mount table. With
// WTX_DISABLE=volatile the mount is an ordinary one, which shows the test
// reads the option.
func TestOverlayViewIsVolatile(t *testing.T) {
	t.Parallel()
	overlayOrSkip(t)
	mountOpts := func(env ...string) string {
		ws, state := t.TempDir(), t.TempDir()
		r := wtxWith(t, len(env) > 0, env, ws, state, "run", "--backend", "overlay", "--", "sh", "-c", "grep ' overlay ' /proc/self/mountinfo")
		if r.code != 0 {
			t.Fatalf("wtx run: %v", r)
		}
		return r.stdout
	}
	if got := mountOpts(); !strings.Contains(got, "volatile") {
		t.Errorf("the view's overlay is not volatile:\n%s", got)
	}
	if got := mountOpts("WTX_DISABLE=volatile"); got == "" || strings.Contains(got, "volatile") {
		t.Errorf("negative control (volatile off): mount table\n%s", got)
	}
}

// TestOverlayVolatileMarkSettles: a run leaves no volatile mark behind, its
// changes are on disk for the next run in the same stage, and a mark a
// killed helper left in this boot is settled by the next command: the stage
// is read, run in again and applied as usual.
func TestOverlayVolatileMarkSettles(t *testing.T) {
	t.Parallel()
	overlayOrSkip(t)
	ws, state := t.TempDir(), t.TempDir()
	if r := runWtx(t, ws, state, "run", "--backend", "overlay", "--name", "s", "--", "sh", "-c", "echo one > a"); r.code != 0 {
		t.Fatalf("wtx run: %v", r)
	}
	dir := stageDir(t, state)
	mark := filepath.Join(dir, "work", "work", "incompat", "volatile")
	if _, err := os.Lstat(mark); err == nil {
		t.Fatal("the volatile mark is left after a run")
	}
	// As a helper killed before it synced leaves it (same boot).
	if err := os.MkdirAll(mark, 0o700); err != nil {
		t.Fatal(err)
	}
	if r := runWtx(t, ws, state, "status", "s"); r.code != 0 {
		t.Fatalf("status with a mark of this boot: %v", r)
	}
	if r := runWtx(t, ws, state, "run", "--tx", "s", "--", "sh", "-c", "echo two > b"); r.code != 0 {
		t.Fatalf("wtx run --tx with a mark of this boot: %v", r)
	}
	if _, err := os.Lstat(mark); err == nil {
		t.Fatal("the volatile mark is left after the next run")
	}
	if r := runWtx(t, ws, state, "apply", "s"); r.code != 0 {
		t.Fatalf("wtx apply: %v", r)
	}
	for name, want := range map[string]string{"a": "one\n", "b": "two\n"} {
		if b, err := os.ReadFile(filepath.Join(ws, name)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", name, b, err, want)
		}
	}
}

// TestOverlayViewInDoubtAfterRestart: a volatile mark from an earlier boot
// means the machine stopped while the view was being written: what the
// command wrote may be incomplete. status, diff, apply, another run, a
// per-file read or write and a fork are refused (io.state-missing) and the
// workspace is untouched; fsck reports it; drop still works. With the check off (WTX_DISABLE=view-in-doubt) the apply lands
// the view, which shows the test sees the refusal.
func TestOverlayViewInDoubtAfterRestart(t *testing.T) {
	t.Parallel()
	overlayOrSkip(t)
	setup := func() (ws, state string) {
		ws, state = t.TempDir(), t.TempDir()
		if err := os.WriteFile(filepath.Join(ws, "a"), []byte("base\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if r := runWtx(t, ws, state, "run", "--backend", "overlay", "--name", "s", "--", "sh", "-c", "echo staged > a"); r.code != 0 {
			t.Fatalf("wtx run: %v", r)
		}
		dir := stageDir(t, state)
		if err := os.MkdirAll(filepath.Join(dir, "work", "work", "incompat", "volatile"), 0o700); err != nil {
			t.Fatal(err)
		}
		// The boot the view was written in is over.
		if err := os.WriteFile(filepath.Join(dir, "view-boot"), []byte("00000000-0000-0000-0000-000000000000\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return ws, state
	}
	ws, state := setup()
	for _, args := range [][]string{{"status", "s"}, {"diff", "s"}, {"apply", "s"}, {"run", "--tx", "s", "--", "true"},
		{"read", "--tx", "s", "a"}, {"fork", "s"}, {"write", "--tx", "s", "b"}, {"rm", "--tx", "s", "a"}} {
		r := runWtx(t, ws, state, append([]string{"--json"}, args...)...)
		if r.code == 0 {
			t.Errorf("wtx %v with the view in doubt succeeded: %v", args, r)
			continue
		}
		if args[0] != "run" {
			if code := errCode(t, r); code != "io.state-missing" {
				t.Errorf("wtx %v: code %q, want io.state-missing\n%s", args, code, r.stdout)
			}
		}
	}
	if dirs, _ := filepath.Glob(filepath.Join(state, "stages", "tx-*")); len(dirs) != 1 {
		t.Errorf("a stage in doubt was carried into another: %v", dirs)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a")); string(b) != "base\n" {
		t.Errorf("the workspace changed: a = %q", b)
	}
	if r := runWtx(t, ws, state, "--json", "fsck"); r.code != 1 || !strings.Contains(r.stdout, `"view-in-doubt"`) {
		t.Errorf("fsck does not report the view in doubt: %v", r)
	}
	if r := runWtx(t, ws, state, "drop", "s"); r.code != 0 {
		t.Errorf("drop of a stage in doubt: %v", r)
	}

	ws, state = setup()
	r := wtxWith(t, true, []string{"WTX_DISABLE=view-in-doubt"}, ws, state, "apply", "s")
	if b, _ := os.ReadFile(filepath.Join(ws, "a")); r.code != 0 || string(b) != "staged\n" {
		t.Errorf("negative control (view-in-doubt off): apply %v, a = %q; want the view applied", r, b)
	}
}
