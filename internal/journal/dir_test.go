//go:build unix

package journal

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/wtx-dev/wtx/internal/fsx"
)

// stateRoot opens a fresh directory as a state root and returns it with a
// directory beside it, outside.
func stateRoot(t *testing.T) (*fsx.Root, string) {
	t.Helper()
	base := t.TempDir()
	for _, d := range []string{"state/ws", "outside"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	r, err := fsx.OpenRoot(filepath.Join(base, "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, filepath.Join(base, "outside")
}

// TestDirLifecycle writes, commits, loads, uncommits and removes a journal
// through a Dir.
func TestDirLifecycle(t *testing.T) {
	r, _ := stateRoot(t)
	d := Dir{Root: r, Rel: "ws/journal"}
	if ops, err := d.Pending(); err != nil || len(ops) != 0 {
		t.Fatalf("Pending of a journal root not made yet: %v %v", ops, err)
	}
	j := sampleJournal()
	if err := d.Write(j); err != nil {
		t.Fatal(err)
	}
	if ops, err := d.Pending(); err != nil || len(ops) != 1 || ops[0] != j.OpID {
		t.Fatalf("Pending = %v, %v", ops, err)
	}
	if _, committed, err := d.Load(j.OpID); err != nil || committed {
		t.Fatalf("Load before Commit: %v %v", committed, err)
	}
	if err := d.Commit(j.OpID); err != nil {
		t.Fatal(err)
	}
	if _, committed, err := d.Load(j.OpID); err != nil || !committed || !d.Committed(j.OpID) {
		t.Fatalf("Load after Commit: %v %v", committed, err)
	}
	if err := d.Uncommit(j.OpID); err != nil || d.Committed(j.OpID) {
		t.Fatalf("Uncommit: %v", err)
	}
	if err := d.Remove(j.OpID); err != nil || d.Exists(j.OpID) {
		t.Fatalf("Remove: %v", err)
	}
	if names, err := r.ReadDir("ws/journal"); err != nil || len(names) != 0 {
		t.Errorf("left in the journal root: %v %v", names, err)
	}
	// A removal cut short leaves a directory Pending does not list, and
	// the next Remove deletes it.
	if err := d.Write(j); err != nil {
		t.Fatal(err)
	}
	if err := r.Rename("ws/journal/"+j.OpID, "ws/journal/"+gonePrefix+j.OpID); err != nil {
		t.Fatal(err)
	}
	if ops, err := d.Pending(); err != nil || len(ops) != 0 {
		t.Errorf("Pending lists a removed journal: %v %v", ops, err)
	}
	d.Sweep()
	if names, err := r.ReadDir("ws/journal"); err != nil || len(names) != 0 {
		t.Errorf("left in the journal root after Sweep: %v %v", names, err)
	}
	if err := d.Write(&Journal{OpID: "../x"}); err == nil {
		t.Error("an op id with a slash was written")
	}
}

// TestDirRefusesLinks plants symlinks where journals live: as the journal
// root, as an op's directory, as the journal file and as the commit
// marker. Nothing is written, read or removed through them.
func TestDirRefusesLinks(t *testing.T) {
	r, out := stateRoot(t)
	root := r.Path()
	j := sampleJournal()
	// The journal root is a link: Write and Pending refuse it.
	if err := os.Symlink(out, filepath.Join(root, "ws", "journal")); err != nil {
		t.Fatal(err)
	}
	d := Dir{Root: r, Rel: "ws/journal"}
	if err := d.Write(j); !errors.Is(err, fsx.ErrSymlink) {
		t.Errorf("Write into a linked journal root: %v, want ErrSymlink", err)
	}
	if _, err := d.Pending(); !errors.Is(err, fsx.ErrSymlink) {
		t.Errorf("Pending of a linked journal root: %v, want ErrSymlink", err)
	}
	if names, _ := os.ReadDir(out); len(names) != 0 {
		t.Fatalf("written outside: %v", names)
	}
	// An op's directory is a link to a journal elsewhere.
	other := Dir{Root: r, Rel: "other"}
	if err := other.Write(j); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "ws", "j2"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "other", j.OpID), filepath.Join(root, "ws", "j2", j.OpID)); err != nil {
		t.Fatal(err)
	}
	d2 := Dir{Root: r, Rel: "ws/j2"}
	if _, err := d2.Pending(); !errors.Is(err, fsx.ErrSymlink) {
		t.Errorf("Pending with a linked op: %v, want ErrSymlink", err)
	}
	if _, _, err := d2.Load(j.OpID); !errors.Is(err, fsx.ErrSymlink) {
		t.Errorf("Load through a linked op: %v, want ErrSymlink", err)
	}
	if err := d2.Remove(j.OpID); err != nil {
		t.Fatal(err)
	}
	if !other.Exists(j.OpID) {
		t.Error("Remove of a linked op removed its target")
	}
	// The journal file and the commit marker are links.
	opDir := filepath.Join(root, "other", j.OpID)
	if err := os.Symlink(filepath.Join(out, "marker"), filepath.Join(opDir, committedName)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := other.Load(j.OpID); !errors.Is(err, fsx.ErrSymlink) {
		t.Errorf("Load with a linked commit marker: %v, want ErrSymlink", err)
	}
	if other.Committed(j.OpID) {
		t.Error("a linked commit marker counts as committed")
	}
	if err := os.Rename(filepath.Join(opDir, journalName), filepath.Join(out, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(out, "moved"), filepath.Join(opDir, journalName)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := other.Load(j.OpID); !errors.Is(err, fsx.ErrSymlink) {
		t.Errorf("Load of a linked journal file: %v, want ErrSymlink", err)
	}
}
