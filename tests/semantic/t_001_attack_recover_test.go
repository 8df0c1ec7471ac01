package semantic

import (
	"os"
	"path/filepath"
	"testing"
)

// dirContents maps each name in dir to its content (a symlink to its
// target).
func dirContents(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	mustDo(t, err)
	out := map[string]string{}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if e.Type()&os.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			mustDo(t, err)
			out[e.Name()] = "-> " + target
			continue
		}
		b, err := os.ReadFile(p)
		mustDo(t, err)
		out[e.Name()] = string(b)
	}
	return out
}

func sameContents(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestT_001_AttackRecoverySwappedLink checks T-001 for recovery: an apply
// that rewrites and deletes files in d is killed after its first exchange;
// then d is replaced by a symlink to a directory outside the workspace
// holding exactly what d held (temporary files included, so that every
// check by content would pass). Neither recover (finishing the apply) nor
// recover --rollback writes, renames or removes anything in that directory:
// the paths are kept as they are or the recovery is refused. Negative
// control (failpoint build, WTX_DISABLE=nofollow): paths beneath the
// workspace resolve the ordinary way, and the recovery works on the
// directory outside.
func TestT_001_AttackRecoverySwappedLink(t *testing.T) {
	t.Parallel()
	for _, mode := range [][]string{{"recover"}, {"recover", "--rollback"}} {
		for _, control := range []bool{false, true} {
			ws, state, out := t.TempDir(), t.TempDir(), t.TempDir()
			d := filepath.Join(ws, "d")
			for _, f := range []string{"f1", "f2", "f3"} {
				mustWrite(t, filepath.Join(d, f), "base "+f+"\n")
			}
			if r := runWtx(t, ws, state, "run", "--backend", "copy", "--", "sh", "-c",
				"echo new > d/f1; echo new > d/f2; rm d/f3"); r.code != 0 {
				t.Fatalf("run: %v", r)
			}
			if r := wtxWith(t, true, []string{"WTX_FAILPOINT=apply:exchanged"}, ws, state, "apply"); r.code != 137 && r.code != -1 {
				t.Fatalf("apply was to be killed at its first exchange: %v", r)
			}
			ents, err := os.ReadDir(d)
			mustDo(t, err)
			for _, e := range ents {
				b, err := os.ReadFile(filepath.Join(d, e.Name()))
				mustDo(t, err)
				mustWrite(t, filepath.Join(out, e.Name()), string(b))
			}
			before := dirContents(t, out)
			mustDo(t, os.Rename(d, d+".real"))
			mustDo(t, os.Symlink(out, d))
			var env []string
			if control {
				env = []string{"WTX_DISABLE=nofollow"}
			}
			res := wtxWith(t, true, env, ws, state, mode...)
			changed := !sameContents(before, dirContents(t, out))
			switch {
			case control && !changed:
				t.Errorf("%v: with links followed, the directory outside was not touched: the case cannot fail (%v)", mode, res)
			case !control && changed:
				t.Errorf("%v: the recovery worked through the link on a directory outside the workspace (%v)", mode, res)
			}
		}
	}
}
