package powerloss

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// TestL3_ModeOnlyChangeIsDurable applies, then undoes, a change set that
// only changes modes (a file's, a directory's), each acknowledged and
// followed by a power cut, with the state directory on another file
// system: nothing later on the workspace's file system (the journal's
// removal, the database) forces the log past the change, so only a sync
// of the changed objects themselves keeps it. Both ways of flushing: one
// syncfs, and an fsync of each object (WTX_DISABLE=syncfs). Then the same
// for the rollback of an apply killed after it changed a mode.
func TestL3_ModeOnlyChangeIsDurable(t *testing.T) {
	for _, mode := range []struct {
		name string
		env  []string
	}{{"syncfs", nil}, {"each", []string{"WTX_DISABLE=syncfs"}}} {
		t.Run(mode.name, func(t *testing.T) {
			fsys := wtxtest.NewLoopFS(t, "xfs", 320, xfsArgs, "")
			h := newHarness(t, fsys, mode.env)
			h.state = t.TempDir()
			for round := range 3 {
				ws := filepath.Join(fsys.Dir, "w", fmt.Sprint(round))
				if err := os.MkdirAll(filepath.Join(ws, "d"), 0o755); err != nil {
					t.Fatal(err)
				}
				for _, p := range []string{"f", "d/g"} {
					if err := os.WriteFile(filepath.Join(ws, p), []byte(p), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.Chmod(filepath.Join(ws, "d"), 0o755); err != nil {
					t.Fatal(err)
				}
				if code, _, out := h.wtx(ws, nil, "run", "--", "sh", "-c", "chmod 700 f d"); code != 0 {
					t.Fatalf("run: %d %s", code, out)
				}
				if err := wtxtest.SyncFS(fsys.Dir); err != nil {
					t.Fatal(err)
				}
				code, _, out := h.wtx(ws, nil, "apply", "--json")
				if code != 0 {
					t.Fatalf("apply: %d %s", code, out)
				}
				cut(t, fsys)
				checkModes(t, ws, "after the apply", 0o700)

				op := opID(t, out)
				if err := wtxtest.SyncFS(fsys.Dir); err != nil {
					t.Fatal(err)
				}
				if code, _, out := h.wtx(ws, nil, "undo", op); code != 0 {
					t.Fatalf("undo: %d %s", code, out)
				}
				cut(t, fsys)
				checkModes(t, ws, "after the undo", 0o644, 0o755)

				// An apply killed after its first step (f's mode), that
				// step made durable: the recovery's rollback puts f's
				// mode back in place, and that must be durable too.
				if code, _, out := h.wtx(ws, nil, "run", "--", "sh", "-c", "chmod 700 f d"); code != 0 {
					t.Fatalf("run: %d %s", code, out)
				}
				if code, _, out := h.wtx(ws, []string{"WTX_FAILPOINT=apply:step-done"}, "apply"); code == 0 {
					t.Fatalf("the apply was not killed: %s", out)
				}
				if err := wtxtest.SyncFS(fsys.Dir); err != nil {
					t.Fatal(err)
				}
				if fi, err := os.Stat(filepath.Join(ws, "f")); err != nil || fi.Mode().Perm() != 0o700 {
					t.Fatalf("the killed apply did not change f's mode first: %v, %v", fi, err)
				}
				if code, _, out := h.wtx(ws, nil, "recover"); code != 0 {
					t.Fatalf("recover: %d %s", code, out)
				}
				cut(t, fsys)
				checkModes(t, ws, "after the rollback of a killed apply", 0o644, 0o755)
			}
		})
	}
}

// cut shuts the file system down without flushing its log and mounts it
// again.
func cut(t *testing.T, fsys *wtxtest.LoopFS) {
	t.Helper()
	if err := fsys.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Remount(); err != nil {
		t.Fatal(err)
	}
}

// checkModes checks the modes of f and d (d's is the last of want).
func checkModes(t *testing.T, ws, when string, want ...fs.FileMode) {
	t.Helper()
	for i, p := range []string{"f", "d"} {
		fi, err := os.Lstat(filepath.Join(ws, p))
		if err != nil {
			t.Fatal(err)
		}
		w := want[min(i, len(want)-1)]
		if fi.Mode().Perm() != w {
			t.Errorf("%s, after a power cut: %s is %04o, want %04o", when, p, fi.Mode().Perm(), w)
		}
	}
}

// opID reads the op id from apply --json's answer.
func opID(t *testing.T, answer string) string {
	t.Helper()
	var a struct {
		OpID string `json:"op_id"`
	}
	i := strings.IndexByte(answer, '{')
	if i < 0 || json.Unmarshal([]byte(answer[i:]), &a) != nil || a.OpID == "" {
		t.Fatalf("no op id in %s", answer)
	}
	return a.OpID
}
