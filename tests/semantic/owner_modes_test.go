//go:build linux

package semantic

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// TestOwnerAppliesAndUndoesDirectoryModes: an ordinary user applies, and
// undoes, a change that closes directories to itself (a new read-only
// tree, an existing directory made read-only after a file is added to it)
// and opens a read-only directory to write in it. The plan opens a
// directory before it removes or writes in it and closes one last, and the
// cleanup empties a directory the op closed, so neither the apply nor the
// undo meets a permission it took away, and the undo lands the workspace
// exactly as it was. (Root passes whatever the order: as root the test runs
// the user through setpriv.)
func TestOwnerAppliesAndUndoesDirectoryModes(t *testing.T) {
	t.Parallel()
	for _, id := range identities(t) {
		t.Run(id.name, func(t *testing.T) {
			r := newOwnerRig(t, id, false, func(ws string) {
				for _, d := range []string{"rw", "ro"} {
					mustDo(t, os.MkdirAll(filepath.Join(ws, d), 0o755))
					mustDo(t, os.WriteFile(filepath.Join(ws, d, "o"), []byte("o\n"), 0o644))
				}
				mustDo(t, os.Chmod(filepath.Join(ws, "ro"), 0o555))
			})
			ws := r.ws
			run := func(args ...string) (int, string) {
				code, out, errs := r.run(t, nil, args...)
				if code != 0 {
					out += errs
				}
				return code, out
			}
			before := wtxtest.MustSnapshot(t, ws)
			code, out := run("--json", "run", "--backend", "copy", "--", "sh", "-c",
				"echo x > rw/new && echo y > rw/o && chmod 555 rw && mkdir -p n/m && echo z > n/m/f && chmod 555 n/m n && "+
					"chmod 755 ro && echo w > ro/new && echo ww > ro/o")
			if code != 0 {
				t.Fatalf("wtx run: exit %d: %s", code, out)
			}
			tx := jsonField(t, wtxResult{stdout: out}, "tx")
			code, out = run("--json", "apply", tx)
			if code != 0 {
				t.Fatalf("apply as %s: exit %d: %s", id.name, code, out)
			}
			op := jsonField(t, wtxResult{stdout: out}, "op_id")
			after := wtxtest.MustSnapshot(t, ws)
			if strings.Contains(after, ".wtx-tmp-") {
				t.Fatalf("the apply left temporary names:\n%s", after)
			}
			if code, out := run("undo", op); code != 0 {
				t.Fatalf("undo as %s: exit %d: %s", id.name, code, out)
			}
			if got := wtxtest.MustSnapshot(t, ws); got != before {
				t.Errorf("after the undo the workspace is not as before:\n%s\nwant\n%s", got, before)
			}
			if code, out := run("log"); code != 0 {
				t.Errorf("the next command after the undo: exit %d: %s", code, out)
			}
		})
	}
}
