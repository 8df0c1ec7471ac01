package crash

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/journal"
	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// TestC_005_ExternalEditAfterCrashIsNeverOverwritten crashes an apply at
// every point after it wrote a path, edits that path outside wtx, and runs
// a wtx command: an uncommitted apply is refused as
// refusal.interrupted-apply naming the path, with the edit left as it is;
// 'wtx recover --rollback' then keeps the edit and restores everything else
// to the before-image. A committed apply rolls forward around the edit.
func TestC_005_ExternalEditAfterCrashIsNeverOverwritten(t *testing.T) {
	f := newFixedFixture(t, mixedTree(t), mixedScript)
	names := countApply(t, f, nil)
	const path, edit = "a", "edited after the crash\n"
	after := byPath(f.after)[path]
	refused := 0
	for k := 1; k <= len(names); k++ {
		r, v := crashApply(f, names, k, nil)
		if len(v) > 0 || !r.killed {
			t.Fatalf("%v %v", r, v)
		}
		if byPath(f.snapshot())[path] != after {
			continue // not written yet (or already rolled back by design)
		}
		ops := f.pending()
		if len(ops) == 0 {
			continue // the apply had finished: nothing to recover
		}
		_, committed, err := journal.Load(f.journalDir(), ops[0])
		if err != nil {
			t.Fatal(err)
		}
		mustDo(t, os.WriteFile(filepath.Join(f.ws, path), []byte(edit), 0o644))
		edited := f.snapshot()
		label := fmt.Sprintf("point %d (%s)", k, names[k-1])
		lr := f.wtx(nil, "--json", "list")
		if committed {
			if lr.code != 0 {
				t.Errorf("%s: committed apply with an edit: recovery failed: %v", label, lr)
			}
			// Rolling forward only removes temporary names.
			if got := f.snapshot(); withoutTemps(got) != withoutTemps(edited) {
				t.Errorf("%s: rolling forward changed the workspace:\n%s", label, diffLines(edited, got))
			}
			continue
		}
		refused++
		var out struct {
			Error struct {
				Code      string `json:"code"`
				Conflicts []struct {
					Path string `json:"path"`
				} `json:"conflicts"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(lr.stdout), &out); err != nil {
			t.Fatalf("%s: --json answer: %v: %v", label, err, lr)
		}
		if lr.code != 2 || out.Error.Code != "refusal.interrupted-apply" || len(out.Error.Conflicts) == 0 || out.Error.Conflicts[0].Path != path {
			t.Errorf("%s: want refusal.interrupted-apply on %s (exit 2), got %v", label, path, lr)
		}
		// The refusal may have rolled back other paths already; the edit
		// itself must be exactly as it was made.
		if got := byPath(f.snapshot())[path]; got != byPath(edited)[path] {
			t.Errorf("%s: the refused recovery touched the edited path: %q", label, got)
		}
		if rr := f.wtx(nil, "recover", "--rollback"); rr.code != 0 {
			t.Errorf("%s: recover --rollback: %v", label, rr)
		}
		want := byPath(f.before)
		want[path] = byPath(edited)[path]
		if got := byPath(f.snapshot()); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: after recover --rollback, want the before-image with the edit kept:\n%s", label, diffLines(joinLines(want), f.snapshot()))
		}
		if d := wtxtest.Debris(f.ws); len(d) > 0 {
			t.Errorf("%s: debris after recover --rollback: %v", label, d)
		}
		if p := f.pending(); len(p) > 0 {
			t.Errorf("%s: journal left after recover --rollback: %v", label, p)
		}
	}
	t.Logf("external edit after a crash: %d crash points refused and rolled back around the edit", refused)
	if refused == 0 {
		t.Fatal("no crash point left the path written and the apply uncommitted")
	}
}

// applied applies f's stage and returns the op id; the workspace must then
// be the after-image.
func applied(t *testing.T, f *fixture) string {
	t.Helper()
	r := f.wtx(nil, "--json", "apply", f.stage)
	if r.code != 0 {
		t.Fatalf("apply: %v", r)
	}
	if got := f.snapshot(); got != f.after {
		t.Fatalf("apply did not land the after-image:\n%s", diffLines(f.after, got))
	}
	return opID(t, r)
}

// TestTX_007_UndoRestoresEveryPath: undo of an apply restores every path
// it wrote (contents, deletions, type changes, symlinks, modes) to the
// before-image, undo of that undo brings the after-image back and makes the
// op live again, so undo of the op restores the before-image once more and
// is then refused.
func TestTX_007_UndoRestoresEveryPath(t *testing.T) {
	for _, f := range promiseFixtures(t) {
		op := applied(t, f)
		r := f.wtx(nil, "--json", "undo", op)
		if r.code != 0 {
			t.Fatalf("undo %s: %v\nscript:\n%s", op, r, f.script)
		}
		if v := f.settled("after undo", f.before); len(v) > 0 {
			t.Fatalf("%s\nscript:\n%s", strings.Join(v, "\n"), f.script)
		}
		undoOp := opID(t, r)
		if r := f.wtx(nil, "undo", undoOp); r.code != 0 {
			t.Fatalf("undo of the undo %s: %v", undoOp, r)
		}
		if v := f.settled("after undo of the undo", f.after); len(v) > 0 {
			t.Fatalf("%s\nscript:\n%s", strings.Join(v, "\n"), f.script)
		}
		// Its undo undone, the op is live again: undo takes it back once
		// more, and then it is undone and a further undo is refused.
		if r := f.wtx(nil, "undo", op); r.code != 0 {
			t.Fatalf("undo of an op whose undo was undone: %v", r)
		}
		if v := f.settled("after undoing the op again", f.before); len(v) > 0 {
			t.Fatalf("%s\nscript:\n%s", strings.Join(v, "\n"), f.script)
		}
		if r := f.wtx(nil, "undo", op); r.code == 0 {
			t.Errorf("undo of an op already undone succeeded: %v", r)
		}
	}
}

// TestTX_007_UndoRefusesWithoutEffect: if any path the op wrote changed
// since, undo exits 2 and changes nothing.
func TestTX_007_UndoRefusesWithoutEffect(t *testing.T) {
	edits := []struct {
		name string
		edit func(ws string) error
	}{
		{"modified file", func(ws string) error { return os.WriteFile(filepath.Join(ws, "a"), []byte("later\n"), 0o644) }},
		{"re-created deleted file", func(ws string) error { return os.WriteFile(filepath.Join(ws, "b"), []byte("other\n"), 0o644) }},
		{"chmod of a chmodded file", func(ws string) error { return os.Chmod(filepath.Join(ws, "exe"), 0o600) }},
		{"retargeted symlink", func(ws string) error {
			if err := os.Remove(filepath.Join(ws, "dangling")); err != nil {
				return err
			}
			return os.Symlink("third", filepath.Join(ws, "dangling"))
		}},
		{"file in a new directory", func(ws string) error {
			return os.WriteFile(filepath.Join(ws, "deep/er/est/f"), []byte("changed\n"), 0o644)
		}},
		{"type-changed path", func(ws string) error {
			if err := os.Remove(filepath.Join(ws, "todir/in")); err != nil {
				return err
			}
			return os.Remove(filepath.Join(ws, "todir"))
		}},
	}
	for _, e := range edits {
		t.Run(e.name, func(t *testing.T) {
			f := newFixedFixture(t, mixedTree(t), mixedScript)
			op := applied(t, f)
			mustDo(t, e.edit(f.ws))
			edited := f.snapshot()
			r := f.wtx(nil, "undo", op)
			if r.code != 2 {
				t.Errorf("undo over a later edit: want exit 2, got %v", r)
			}
			if got := f.snapshot(); got != edited {
				t.Errorf("a refused undo changed the workspace:\n%s", diffLines(edited, got))
			}
			if d := wtxtest.Debris(f.ws); len(d) > 0 {
				t.Errorf("debris: %v", d)
			}
		})
	}
}

// TestTX_007_UndoIsCrashAtomic crashes an undo at every one of its points:
// after recovery the workspace is the pre-undo image (until the undo's
// commit marker) or the post-undo image (from it on), and undoing again
// ends at the post-undo image.
func TestTX_007_UndoIsCrashAtomic(t *testing.T) {
	crashes := 0
	for _, f := range promiseFixtures(t)[:3] {
		crashes += undoCrashes(t, f)
	}
	t.Logf("undo crash atomicity: %d crash points, all recovered to one side", crashes)
}

// TestTX_007_UndoOfClosedDirectoriesIsCrashAtomic is the same for an op
// that made a directory, wrote into it and closed it and its parent to
// their owner (mode 0555): rolling back its killed undo puts the file back
// into the closed directory, which an ordinary user can do only by
// opening it for the while.
func TestTX_007_UndoOfClosedDirectoriesIsCrashAtomic(t *testing.T) {
	f := newFixedFixture(t, func(ws string) {
		if err := os.Mkdir(filepath.Join(ws, "r"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, "r", "f"), []byte("o\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}, "echo M > r/f; mkdir r/new; echo z > r/new/z; chmod 0555 r/new; chmod 0555 r")
	t.Logf("undo of closed directories: %d crash points, all recovered to one side", undoCrashes(t, f))
}

// undoCrashes applies f's stage, then kills its undo at every crash point
// in turn, each from the applied state: recovery must leave the applied
// state before the commit marker and the undone one after it, and an undo
// run again must then leave the undone state. It returns the points.
func undoCrashes(t *testing.T, f *fixture) int {
	t.Helper()
	op := applied(t, f)
	f.save()
	names, r := f.points(nil, "undo", op)
	if r.code != 0 || f.snapshot() != f.before {
		t.Fatalf("uncrashed undo: %v", r)
	}
	commit := committedAt(names, "apply:committed")
	for k := 1; k <= len(names); k++ {
		f.restore()
		r := f.wtx(fp(k), "undo", op)
		if !r.killed {
			t.Fatalf("point %d (%s) did not kill the undo: %v", k, names[k-1], r)
		}
		want, side := f.after, "pre-undo"
		if k >= commit {
			want, side = f.before, "post-undo"
		}
		label := fmt.Sprintf("undo killed at %d/%d (%s), want the %s image", k, len(names), names[k-1], side)
		var v []string
		if rr := f.wtx(nil, "list"); rr.code != 0 {
			v = append(v, fmt.Sprintf("%s: recovery: %v", label, rr))
		}
		v = append(v, f.settled(label, want)...)
		rr := f.wtx(nil, "--json", "undo", op)
		if rr.code != 0 && !strings.Contains(rr.stdout, "already") {
			v = append(v, fmt.Sprintf("%s: undo again: %v", label, rr))
		}
		v = append(v, f.settled(label+", undone again", f.before)...)
		if len(v) > 0 {
			t.Errorf("%s\nscript:\n%s", strings.Join(v, "\n"), f.script)
		}
	}
	return len(names)
}

// withoutTemps drops the lines of wtx's temporary names from a snapshot.
func withoutTemps(snap string) string {
	var keep []string
	for _, l := range strings.Split(snap, "\n") {
		if !strings.HasPrefix(l, ".wtx-tmp-") && !strings.Contains(l, "/.wtx-tmp-") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
