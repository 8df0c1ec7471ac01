//go:build linux

package semantic

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// closedDirApply has identity id apply, with the failpoint build and env
// added, a stage that rewrites a file and makes its directory read-only,
// then run 'wtx log'. It returns the apply's and that command's exit codes
// and output, and the names left in the directory.
func closedDirApply(t *testing.T, id identity, env ...string) (applyCode, nextCode int, out string, names []string) {
	t.Helper()
	r := newOwnerRig(t, id, true, func(ws string) {
		mustDo(t, os.MkdirAll(filepath.Join(ws, "ro"), 0o755))
		mustDo(t, os.WriteFile(filepath.Join(ws, "ro", "o"), []byte("o\n"), 0o644))
	})
	if code, o, e := r.run(t, env, "run", "--backend", "copy", "--name", "s", "--", "sh", "-c", "echo new > ro/o && chmod 555 ro"); code != 0 {
		t.Fatalf("wtx run: exit %d: %s%s", code, o, e)
	}
	applyCode, o1, e1 := r.run(t, env, "apply", "s")
	nextCode, o2, e2 := r.run(t, env, "log")
	entries, err := os.ReadDir(filepath.Join(r.ws, "ro"))
	mustDo(t, err)
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return applyCode, nextCode, o1 + e1 + o2 + e2, names
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
	t.Parallel()
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
