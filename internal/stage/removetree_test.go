//go:build unix

package stage

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// linkedTree makes in dir a tree that holds links to outside (a directory
// holding a file), and a directory with no permission bits when locked.
func linkedTree(t *testing.T, dir, outside string, locked bool) {
	t.Helper()
	for _, d := range []string{filepath.Join(dir, "view", "d"), filepath.Join(dir, "work", "work"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(dir, "view", "d", "f"), filepath.Join(outside, "keep")} {
		if err := os.WriteFile(f, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []string{filepath.Join(dir, "view", "out"), filepath.Join(dir, "view", "d", "out")} {
		if err := os.Symlink(outside, l); err != nil {
			t.Fatal(err)
		}
	}
	if !locked {
		return
	}
	if err := os.Chmod(filepath.Join(dir, "work", "work"), 0); err != nil {
		t.Fatal(err)
	}
}

// TestRemoveTreeKeepsLinksTargets checks that RemoveTree removes a tree
// whose links lead outside it, and a directory without permission bits,
// and never what the links lead to.
func TestRemoveTreeKeepsLinksTargets(t *testing.T) {
	base := t.TempDir()
	dir, outside := filepath.Join(base, "stage"), filepath.Join(base, "outside")
	linkedTree(t, dir, outside, true)
	if err := RemoveTree(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("the tree is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "keep")); err != nil {
		t.Errorf("a link's target lost its file: %v", err)
	}
	if err := RemoveTree(dir); err != nil {
		t.Errorf("a tree already gone: %v", err)
	}
}

// TestForkCopiesLinksAsLinks checks that Fork copies links as links (their
// targets never read), leaves the scratch directory empty and keeps the
// bits of a read-only directory.
func TestForkCopiesLinksAsLinks(t *testing.T) {
	base := t.TempDir()
	src, dst, outside := filepath.Join(base, "src"), filepath.Join(base, "dst"), filepath.Join(base, "outside")
	linkedTree(t, src, outside, false)
	if err := os.Chmod(filepath.Join(src, "view", "d"), 0o555); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(filepath.Join(src, "view", "d"), 0o755)
	if err := Fork(context.Background(), src, dst); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"view/out", "view/d/out"} {
		target, err := os.Readlink(filepath.Join(dst, l))
		if err != nil || target != outside {
			t.Errorf("%s: %q, %v; want a link to %s", l, target, err, outside)
		}
	}
	if got, err := os.ReadFile(filepath.Join(dst, "view", "d", "f")); err != nil || string(got) != "x\n" {
		t.Errorf("view/d/f: %q, %v", got, err)
	}
	if ents, err := os.ReadDir(filepath.Join(dst, "work")); err != nil || len(ents) != 0 {
		t.Errorf("the scratch directory holds %v (%v); want it empty", ents, err)
	}
	if fi, err := os.Lstat(filepath.Join(dst, "view", "d")); err != nil || fi.Mode().Perm() != 0o555 {
		t.Errorf("view/d: %v, %v; want its bits 0555", fi.Mode(), err)
	}
	defer os.Chmod(filepath.Join(dst, "view", "d"), 0o755)
	if err := Fork(context.Background(), src, dst); !errors.Is(err, fs.ErrExist) {
		t.Errorf("a fork onto an existing directory: %v; want it refused as existing", err)
	}
}
