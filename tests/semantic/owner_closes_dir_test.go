//go:build linux

package semantic

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// closedDirApply has identity id apply, with the failpoint build and env
// added, a stage that rewrites a file and makes its directory read-only,
// then run 'wtx log'. It returns the apply's and that command's output and
// exit codes, and the names left in the directory.
func closedDirApply(t *testing.T, id identity, env ...string) (applyCode, statusCode int, out string, names []string) {
	t.Helper()
	base, err := os.MkdirTemp("", "wtx-closed-")
	mustDo(t, err)
	t.Cleanup(func() {
		_ = os.Chmod(filepath.Join(base, "ws", "ro"), 0o755) // so that the tree can go
		removeUnmounted(t, base)
	})
	mustDo(t, os.Chmod(base, 0o755))
	ws, state, bin := filepath.Join(base, "ws"), filepath.Join(base, "state"), filepath.Join(base, "wtx")
	mustDo(t, os.MkdirAll(filepath.Join(ws, "ro"), 0o755))
	mustDo(t, os.Mkdir(state, 0o700))
	mustDo(t, os.WriteFile(filepath.Join(ws, "ro", "o"), []byte("o\n"), 0o644))
	copyExec(t, wtxtest.Binary(t, true), bin)
	if id.uid != os.Geteuid() {
		for _, p := range []string{ws, state} {
			mustDo(t, filepath.Walk(p, func(p string, _ os.FileInfo, err error) error {
				if err != nil {
					return err
				}
				return os.Lchown(p, id.uid, id.uid)
			}))
		}
	}
	run := func(args ...string) (int, string) {
		argv := append(append(append([]string{}, id.prefix...), bin, "-C", ws), args...)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(append(os.Environ(), "WTX_STATE_DIR="+state, "HOME="+state), env...)
		b, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(b)
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, string(b)
	}
	if code, o := run("run", "--backend", "copy", "--name", "s", "--", "sh", "-c", "echo new > ro/o && chmod 555 ro"); code != 0 {
		t.Fatalf("wtx run: exit %d: %s", code, o)
	}
	applyCode, o1 := run("apply", "s")
	statusCode, o2 := run("log")
	entries, err := os.ReadDir(filepath.Join(ws, "ro"))
	mustDo(t, err)
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return applyCode, statusCode, o1 + o2, names
}

// TestApplyClosingItsDirectoryCleansUp: an ordinary user's apply that
// rewrites a file and makes its directory read-only lands, leaves none of
// wtx's temporary names there (the pre-image it moved aside goes with the
// directory opened for a moment), and the next command finds nothing to
// recover. With that opening switched off (WTX_DISABLE=open-to-clean) the
// pre-image stays behind and every later command stops in recovery, which
// shows the test sees it. (Root removes what it likes: as root the test
// runs the user through setpriv.)
func TestApplyClosingItsDirectoryCleansUp(t *testing.T) {
	for _, id := range identities(t) {
		t.Run(id.name, func(t *testing.T) {
			a, s, out, names := closedDirApply(t, id)
			if a != 0 || s != 0 || len(names) != 1 || names[0] != "o" {
				t.Errorf("apply exit %d, next command exit %d, ro holds %v; want 0, 0, [o]:\n%s", a, s, names, out)
			}
			if id.uid == 0 {
				return // the negative control needs an owner that permissions bind
			}
			_, s, out, names = closedDirApply(t, id, "WTX_DISABLE=open-to-clean")
			if s == 0 && len(names) == 1 {
				t.Errorf("negative control (open-to-clean off): next command exit %d, ro holds %v; want the moved-aside pre-image left and recovery stopped:\n%s", s, names, out)
			}
			if !strings.Contains(out, "permission denied") {
				t.Logf("negative control output:\n%s", out)
			}
		})
	}
}
