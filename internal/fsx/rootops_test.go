//go:build unix

package fsx

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// linkedRels are rel paths of the fixture that pass through a symlink
// before their last component, each to the canary or back inside.
var linkedRels = []string{"a/out/secret", "a/up/secret", "a/in/file", "lastlink/b/file", "a/out/sub/new", "lastlink/new"}

// TestRootOpsRefuseLinks checks that no rel-path method of Root goes
// through a symlink on the way to its last component, with either
// resolver: each fails with ErrSymlink and the canary is left as it was.
func TestRootOpsRefuseLinks(t *testing.T) {
	eachResolver(t, func(t *testing.T) {
		f := newFixture(t)
		before := snapshot(t, f.canary)
		ops := map[string]func(rel string) error{
			"OpenFile": func(rel string) error {
				file, err := f.root.OpenFile(rel, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
				if file != nil {
					file.Close()
				}
				return err
			},
			"ReadFile": func(rel string) error { _, err := f.root.ReadFile(rel); return err },
			"WriteFileAtomic": func(rel string) error {
				return f.root.WriteFileAtomic(rel, []byte("x"), 0o600)
			},
			"MkdirAll": func(rel string) error {
				d, err := f.root.MkdirAll(rel+"/d", 0o700)
				if d != nil {
					d.Close()
				}
				return err
			},
			"RemoveAll": func(rel string) error { return f.root.RemoveAll(rel) },
			"Remove":    func(rel string) error { return f.root.Remove(rel) },
			"Rename":    func(rel string) error { return f.root.Rename("file", rel) },
			"Chmod":     func(rel string) error { return f.root.Chmod(rel, 0o777) },
			"ReadDir":   func(rel string) error { _, err := f.root.ReadDir(rel); return err },
		}
		for name, op := range ops {
			for _, rel := range linkedRels {
				if name == "ReadDir" {
					rel = filepath.Dir(rel)
				}
				if err := op(rel); !errors.Is(err, ErrSymlink) {
					t.Errorf("%s(%q) = %v, want ErrSymlink", name, rel, err)
				}
			}
		}
		if after := snapshot(t, f.canary); after != before {
			t.Errorf("the canary changed:\n%s\nwas\n%s", after, before)
		}
		if got := readFile(t, filepath.Join(f.dir, "file")); got != "top" {
			t.Errorf("root/file = %q after refused renames", got)
		}
	})
}

// TestRootOpenFileLastComponent checks OpenFile on what it finds at rel
// itself: a symlink (to a file, or dangling, with O_CREATE) is refused and
// its target neither opened nor created; a FIFO is refused without
// blocking; a regular file is opened, and truncated only when asked.
func TestRootOpenFileLastComponent(t *testing.T) {
	f := newFixture(t)
	mustSymlink(t, filepath.Join(f.canary, "secret"), filepath.Join(f.dir, "tolink"))
	mustSymlink(t, filepath.Join(f.canary, "made"), filepath.Join(f.dir, "dangling"))
	if err := unix.Mkfifo(filepath.Join(f.dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"tolink", "dangling"} {
		file, err := f.root.OpenFile(rel, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
		if !errors.Is(err, ErrSymlink) || !errors.Is(err, ErrNotRegular) {
			t.Errorf("OpenFile(%q) = %v, want ErrSymlink and ErrNotRegular", rel, err)
		}
		if file != nil {
			file.Close()
		}
	}
	if got := readFile(t, filepath.Join(f.canary, "secret")); got != "canary" {
		t.Errorf("the link's target was truncated or written: %q", got)
	}
	if _, err := os.Lstat(filepath.Join(f.canary, "made")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a dangling link's target was created: %v", err)
	}
	if _, err := f.root.OpenFile("fifo", os.O_RDWR, 0); !errors.Is(err, ErrNotRegular) {
		t.Errorf("OpenFile(fifo) = %v, want ErrNotRegular", err)
	}
	file, err := f.root.OpenFile("a/b/file", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	file.Close()
	if got := readFile(t, filepath.Join(f.dir, "a/b/file")); got != "data" {
		t.Errorf("opened without O_TRUNC: %q", got)
	}
	file, err = f.root.OpenFile("a/b/file", os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := file.WriteString("new"); err != nil {
		t.Fatal(err)
	}
	file.Close()
	if got := readFile(t, filepath.Join(f.dir, "a/b/file")); got != "new" {
		t.Errorf("after O_TRUNC and a write: %q", got)
	}
	if _, err := f.root.OpenFile("a/b/file", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); !errors.Is(err, fs.ErrExist) {
		t.Errorf("O_EXCL on an existing file: %v", err)
	}
}

// TestRootWriteAtomic checks that WriteAtomic refuses a symlink or a
// directory at rel (neither writing the link's target nor replacing what
// is there), writes exactly perm and leaves no temporary file, and that an
// error of the writer leaves rel as it was.
func TestRootWriteAtomic(t *testing.T) {
	f := newFixture(t)
	mustSymlink(t, filepath.Join(f.canary, "secret"), filepath.Join(f.dir, "a", "b", "link"))
	if err := f.root.WriteFileAtomic("a/b/link", []byte("mine"), 0o640); !errors.Is(err, ErrSymlink) {
		t.Errorf("WriteFileAtomic over a link = %v, want ErrSymlink", err)
	}
	if fi, err := os.Lstat(filepath.Join(f.dir, "a/b/link")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", fi, err)
	}
	if err := f.root.WriteFileAtomic("a/b/c", []byte("mine"), 0o640); !errors.Is(err, ErrNotRegular) {
		t.Errorf("WriteFileAtomic over a directory = %v, want ErrNotRegular", err)
	}
	if got := readFile(t, filepath.Join(f.canary, "secret")); got != "canary" {
		t.Errorf("the link's target was written: %q", got)
	}
	if err := f.root.WriteFileAtomic("a/b/new", []byte("mine"), 0o640); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(f.dir, "a/b/new")); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o640 {
		t.Fatalf("a/b/new after WriteFileAtomic: %v %v", fi, err)
	}
	boom := errors.New("boom")
	err := f.root.WriteAtomic("a/b/file", 0o600, func(w io.Writer) error {
		_, _ = w.Write([]byte("half")) // the error below is the point
		return boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("WriteAtomic with a failing writer: %v", err)
	}
	if got := readFile(t, filepath.Join(f.dir, "a/b/file")); got != "data" {
		t.Errorf("a failed write changed the file: %q", got)
	}
	names, err := os.ReadDir(filepath.Join(f.dir, "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n.Name() != "c" && n.Name() != "file" && n.Name() != "link" && n.Name() != "new" {
			t.Errorf("left behind: %s", n.Name())
		}
	}
}

// TestRootMkdirAll checks that MkdirAll makes every missing directory with
// exactly perm whatever the umask, keeps existing ones, and refuses a
// symlink or a file on the way without making anything beyond it.
func TestRootMkdirAll(t *testing.T) {
	eachResolver(t, func(t *testing.T) {
		f := newFixture(t)
		old := unix.Umask(0o077)
		defer unix.Umask(old)
		d, err := f.root.MkdirAll("a/b/x/y/z", 0o750)
		if err != nil {
			t.Fatal(err)
		}
		if d.Rel() != "a/b/x/y/z" {
			t.Errorf("Rel() = %q", d.Rel())
		}
		d.Close()
		for _, rel := range []string{"a/b/x", "a/b/x/y", "a/b/x/y/z"} {
			if fi, err := os.Stat(filepath.Join(f.dir, rel)); err != nil || fi.Mode().Perm() != 0o750 {
				t.Errorf("%s: %v %v, want 0750", rel, fi.Mode(), err)
			}
		}
		if fi, _ := os.Stat(filepath.Join(f.dir, "a/b")); fi.Mode().Perm() != 0o755 {
			t.Errorf("an existing directory's mode changed: %v", fi.Mode())
		}
		if _, err := f.root.MkdirAll("a/b/file/sub", 0o700); !errors.Is(err, ErrNotDir) {
			t.Errorf("MkdirAll through a file = %v, want ErrNotDir", err)
		}
		if _, err := f.root.MkdirAll("a/b/x/y/z", 0o700); err != nil {
			t.Errorf("MkdirAll of an existing directory: %v", err)
		}
	})
}

// TestRootRemoveAll removes a tree that holds links out of it (to a
// directory, to a file, dangling) and directories its owner may not write
// or read: everything goes, the links' targets stay.
func TestRootRemoveAll(t *testing.T) {
	eachResolver(t, func(t *testing.T) {
		f := newFixture(t)
		before := snapshot(t, f.canary)
		x := filepath.Join(f.dir, "x")
		mustMkdir(t, filepath.Join(x, "ro", "deep"))
		mustMkdir(t, filepath.Join(x, "closed", "in"))
		mustWrite(t, filepath.Join(x, "ro", "deep", "f"), "f", 0o400)
		mustWrite(t, filepath.Join(x, "closed", "in", "g"), "g", 0o600)
		mustSymlink(t, f.canary, filepath.Join(x, "ro", "todir"))
		mustSymlink(t, filepath.Join(f.canary, "secret"), filepath.Join(x, "tofile"))
		mustSymlink(t, filepath.Join(f.canary, "gone"), filepath.Join(x, "dangling"))
		for p, m := range map[string]fs.FileMode{filepath.Join(x, "ro", "deep"): 0o500, filepath.Join(x, "ro"): 0o500, filepath.Join(x, "closed"): 0} {
			if err := os.Chmod(p, m); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.root.RemoveAll("x"); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(x); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("x is still there: %v", err)
		}
		if after := snapshot(t, f.canary); after != before {
			t.Errorf("the canary changed:\n%s\nwas\n%s", after, before)
		}
		if err := f.root.RemoveAll("x"); err != nil {
			t.Errorf("RemoveAll of a missing path: %v", err)
		}
		// A link given as rel is removed itself.
		if err := f.root.RemoveAll("a/out"); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(filepath.Join(f.canary, "secret")); err != nil {
			t.Errorf("the target of a removed link: %v", err)
		}
	})
}

// TestRootRenameRemoveChmod checks the single-entry methods on a symlink
// at rel: Rename and Remove act on the link, Chmod refuses it.
func TestRootRenameRemoveChmod(t *testing.T) {
	f := newFixture(t)
	if err := f.root.Chmod("a/out", 0o777); !errors.Is(err, ErrSymlink) {
		t.Errorf("Chmod of a link = %v, want ErrSymlink", err)
	}
	if err := f.root.Rename("a/out", "a/b/moved"); err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(filepath.Join(f.dir, "a/b/moved")); err != nil || target != f.canary {
		t.Errorf("the link did not move: %q %v", target, err)
	}
	if err := f.root.Remove("a/b/moved"); err != nil {
		t.Fatal(err)
	}
	if err := f.root.Remove("a/b/c"); err != nil {
		t.Errorf("Remove of an empty directory: %v", err)
	}
	if err := f.root.Chmod(".", 0o711); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(f.dir); fi.Mode().Perm() != 0o711 {
		t.Errorf("Chmod(.) gave %v", fi.Mode())
	}
	if names, err := os.ReadDir(f.canary); err != nil || len(names) != 2 {
		t.Errorf("the canary: %v %v", names, err)
	}
}

// TestDiskUsageStaysInside checks that DiskUsage does not count what a
// link points to.
func TestDiskUsageStaysInside(t *testing.T) {
	f := newFixture(t)
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i)
	}
	if err := os.WriteFile(filepath.Join(f.canary, "big"), big, 0o600); err != nil {
		t.Fatal(err)
	}
	if n := f.root.DiskUsage("a"); n <= 0 || n >= 1<<20 {
		t.Errorf("DiskUsage(a) = %d: counted the canary, or nothing", n)
	}
	if n := f.root.DiskUsage("."); n <= 0 || n >= 1<<20 {
		t.Errorf("DiskUsage(.) = %d", n)
	}
	if n := f.root.DiskUsage("missing"); n != 0 {
		t.Errorf("DiskUsage(missing) = %d", n)
	}
}

// TestDirReadSmallFile checks that a Dir reads a small file whole and
// refuses a symlink in its place.
func TestDirReadSmallFile(t *testing.T) {
	f := newFixture(t)
	d := f.openDir(t, "a")
	buf := make([]byte, 64)
	if _, _, err := d.ReadSmallFile("out", buf); !errors.Is(err, ErrSymlink) {
		t.Errorf("ReadSmallFile(link) = %v, want ErrSymlink", err)
	}
	if _, _, err := d.ReadSmallFile("b", buf); !errors.Is(err, ErrNotRegular) {
		t.Errorf("ReadSmallFile(dir) = %v, want ErrNotRegular", err)
	}
	b := f.openDir(t, "a/b")
	data, large, err := b.ReadSmallFile("file", buf)
	if err != nil || large != nil || string(data) != "data" {
		t.Errorf("ReadSmallFile(file) = %q, %v, %v", data, large, err)
	}
}

// TestNoFollowControl is the negative control of the tests above: with the
// discipline switched off (WTX_DISABLE=nofollow in a failpoint build) the
// same calls go through the links, so those tests can fail.
func TestNoFollowControl(t *testing.T) {
	f := newFixture(t)
	old := follow
	follow = true
	defer func() { follow = old }()
	data, err := f.root.ReadFile("a/out/secret")
	if err != nil || string(data) != "canary" {
		t.Fatalf("without the discipline ReadFile did not follow the link: %q %v", data, err)
	}
	if err := f.root.WriteFileAtomic("a/up/planted", []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(f.canary, "planted")); err != nil {
		t.Errorf("without the discipline the write did not land beyond the link: %v", err)
	}
	names, err := f.root.ReadDir("lastlink")
	if err != nil || !slices.Contains(names, "b") {
		t.Errorf("without the discipline ReadDir(lastlink) = %v, %v", names, err)
	}
}
