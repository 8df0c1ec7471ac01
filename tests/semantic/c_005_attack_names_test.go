package semantic

import (
	"os"
	"path/filepath"
	"testing"
)

// TestC_005_AttackRecoveryKeepsLookalikeNames checks C-005 against a
// workspace that holds names which look like wtx's temporary files
// (.wtx-tmp-restore-…, a file and a symlink, put there by a person or a
// repository; stages never carry such names, but the workspace may). An
// apply that rewrites and deletes files beside them is killed after its
// first exchange and rolled back: the workspace is wholly as before, the
// lookalikes included. Before, the rollback removed every
// .wtx-tmp-restore-* name in the directories it restored, its own or not.
// Negative control (failpoint build, WTX_DISABLE=restore-prefix): the one
// prefix of every op comes back, and the lookalikes go.
func TestC_005_AttackRecoveryKeepsLookalikeNames(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		ws, state := t.TempDir(), t.TempDir()
		d := filepath.Join(ws, "d")
		for _, f := range []string{"f1", "f2", "f3"} {
			mustWrite(t, filepath.Join(d, f), "base "+f+"\n")
		}
		mustWrite(t, filepath.Join(d, ".wtx-tmp-restore-notes"), "mine\n")
		mustDo(t, os.Symlink("f1", filepath.Join(d, ".wtx-tmp-restore-l")))
		if r := runWtx(t, ws, state, "run", "--backend", "copy", "--", "sh", "-c",
			"echo new > d/f1; echo new > d/f2; rm d/f3"); r.code != 0 {
			t.Fatalf("run: %v", r)
		}
		if r := wtxWith(t, true, []string{"WTX_FAILPOINT=apply:exchanged"}, ws, state, "apply"); r.code != 137 && r.code != -1 {
			t.Fatalf("apply was to be killed at its first exchange: %v", r)
		}
		var env []string
		if control {
			env = []string{"WTX_DISABLE=restore-prefix"}
		}
		if r := wtxWith(t, true, env, ws, state, "recover", "--rollback"); r.code != 0 {
			t.Fatalf("recover --rollback: %v", r)
		}
		for _, f := range []string{"f1", "f2", "f3"} {
			if got, err := os.ReadFile(filepath.Join(d, f)); err != nil || string(got) != "base "+f+"\n" {
				t.Errorf("control=%v: d/%s after the rollback: %q, %v", control, f, got, err)
			}
		}
		_, errNotes := os.Lstat(filepath.Join(d, ".wtx-tmp-restore-notes"))
		_, errLink := os.Lstat(filepath.Join(d, ".wtx-tmp-restore-l"))
		gone := errNotes != nil || errLink != nil
		switch {
		case control && !gone:
			t.Errorf("with one prefix for every op the lookalikes stayed: the case cannot fail")
		case !control && gone:
			t.Errorf("the rollback removed files of the workspace that no op made: %v; %v", errNotes, errLink)
		}
	}
}
