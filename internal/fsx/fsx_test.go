//go:build unix

package fsx

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// fixture is a workspace root next to a canary directory outside it.
type fixture struct {
	root   *Root
	dir    string // the root path
	canary string // a directory outside the root
}

// newFixture builds:
//
//	root/a/b/c/           directories
//	root/a/b/file         "data"
//	root/a/in -> b        symlink inside the root
//	root/a/out -> canary  absolute symlink outside
//	root/a/up -> ../../canary
//	root/lastlink -> a
//	root/file             "top"
//	canary/secret         "canary", mode 0640
//	canary/sub/
func newFixture(t *testing.T) *fixture {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "root")
	canary := filepath.Join(base, "canary")
	mustMkdir(t, filepath.Join(dir, "a", "b", "c"))
	mustMkdir(t, filepath.Join(canary, "sub"))
	mustWrite(t, filepath.Join(dir, "a", "b", "file"), "data", 0o644)
	mustWrite(t, filepath.Join(dir, "file"), "top", 0o644)
	mustWrite(t, filepath.Join(canary, "secret"), "canary", 0o640)
	mustSymlink(t, "b", filepath.Join(dir, "a", "in"))
	mustSymlink(t, canary, filepath.Join(dir, "a", "out"))
	mustSymlink(t, "../../canary", filepath.Join(dir, "a", "up"))
	mustSymlink(t, "a", filepath.Join(dir, "lastlink"))
	r, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return &fixture{root: r, dir: dir, canary: canary}
}

func (f *fixture) openDir(t *testing.T, rel string) *Dir {
	t.Helper()
	d, err := f.root.OpenDir(rel)
	if err != nil {
		t.Fatalf("OpenDir(%q): %v", rel, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func mustMkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, p, data string, perm fs.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// snapshot describes every entry under dir: path, mode, size, mtime, content
// or link target.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		b.WriteString(p + " " + info.Mode().String() + " " + info.ModTime().String())
		switch {
		case info.Mode().IsRegular():
			b.WriteString(" " + readFile(t, p))
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			b.WriteString(" -> " + target)
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestOpenRoot(t *testing.T) {
	base := t.TempDir()
	mustMkdir(t, filepath.Join(base, "dir"))
	mustWrite(t, filepath.Join(base, "file"), "x", 0o644)
	mustSymlink(t, "dir", filepath.Join(base, "link"))
	tests := []struct {
		path string
		want error
	}{
		{filepath.Join(base, "dir"), nil},
		{"relative/dir", ErrInvalidPath},
		{filepath.Join(base, "link"), ErrSymlink},
		{filepath.Join(base, "file"), ErrNotDir},
		{filepath.Join(base, "missing"), fs.ErrNotExist},
	}
	for _, tt := range tests {
		r, err := OpenRoot(tt.path)
		if tt.want == nil {
			if err != nil {
				t.Errorf("OpenRoot(%q): %v", tt.path, err)
				continue
			}
			var st unix.Stat_t
			if err := unix.Stat(tt.path, &st); err != nil {
				t.Fatal(err)
			}
			if r.Path() != tt.path || r.Dev() != uint64(st.Dev) {
				t.Errorf("root = %q dev %d, want %q dev %d", r.Path(), r.Dev(), tt.path, st.Dev)
			}
			if err := r.Close(); err != nil {
				t.Error(err)
			}
			if err := r.Close(); !errors.Is(err, os.ErrClosed) {
				t.Errorf("second Close = %v, want ErrClosed", err)
			}
			continue
		}
		if !errors.Is(err, tt.want) {
			t.Errorf("OpenRoot(%q) = %v, want %v", tt.path, err, tt.want)
		}
	}
}

func TestOpenDir(t *testing.T) {
	tests := []struct {
		rel     string
		want    error
		at      string   // the path the error names
		entries []string // for a successful open
	}{
		{".", nil, "", []string{"a", "file", "lastlink"}},
		{"a", nil, "", []string{"b", "in", "out", "up"}},
		{"a/b", nil, "", []string{"c", "file"}},
		{"a/b/c", nil, "", []string{}},
		{"a/in", ErrSymlink, "a/in", nil},       // final component, inside
		{"a/in/c", ErrSymlink, "a/in", nil},     // middle component, inside
		{"a/out", ErrSymlink, "a/out", nil},     // final component, outside
		{"a/out/sub", ErrSymlink, "a/out", nil}, // middle component, absolute outside
		{"a/up/sub", ErrSymlink, "a/up", nil},   // middle component, relative outside
		{"lastlink", ErrSymlink, "lastlink", nil},
		{"lastlink/b", ErrSymlink, "lastlink", nil},
		{"file", ErrNotDir, "file", nil},
		{"a/b/file/x", ErrNotDir, "a/b/file", nil},
		{"missing", fs.ErrNotExist, "missing", nil},
		{"a/missing/c", fs.ErrNotExist, "a/missing", nil},
		{"../canary", ErrInvalidPath, "../canary", nil},
		{"a/../a", ErrInvalidPath, "a/../a", nil},
		{"a/", ErrInvalidPath, "a/", nil},
		{"/a", ErrInvalidPath, "/a", nil},
	}
	eachResolver(t, func(t *testing.T) {
		f := newFixture(t)
		before := snapshot(t, f.canary)
		for _, tt := range tests {
			d, err := f.root.OpenDir(tt.rel)
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Errorf("OpenDir(%q) = %v, want %v", tt.rel, err, tt.want)
				}
				var pe *fs.PathError
				if !errors.As(err, &pe) || pe.Path != tt.at {
					t.Errorf("OpenDir(%q) error %q does not name %q", tt.rel, err, tt.at)
				}
				if d != nil {
					d.Close()
				}
				continue
			}
			if err != nil {
				t.Errorf("OpenDir(%q): %v", tt.rel, err)
				continue
			}
			names, err := d.ReadDir()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(names, tt.entries) {
				t.Errorf("OpenDir(%q) lists %q, want %q", tt.rel, names, tt.entries)
			}
			if d.Rel() != tt.rel {
				t.Errorf("Rel() = %q, want %q", d.Rel(), tt.rel)
			}
			d.Close()
		}
		if after := snapshot(t, f.canary); after != before {
			t.Errorf("canary changed:\n%s\nwant\n%s", after, before)
		}
	})
}

func TestDirOpenDir(t *testing.T) {
	f := newFixture(t)
	a := f.openDir(t, "a")
	tests := []struct {
		name string
		want error
	}{
		{"b", nil},
		{"in", ErrSymlink},
		{"out", ErrSymlink},
		{"missing", fs.ErrNotExist},
		{"b/c", ErrInvalidPath},
		{"..", ErrInvalidPath},
	}
	for _, tt := range tests {
		d, err := a.OpenDir(tt.name)
		if !errors.Is(err, tt.want) {
			t.Errorf("OpenDir(%q) = %v, want %v", tt.name, err, tt.want)
		}
		if err == nil {
			if d.Rel() != "a/"+tt.name {
				t.Errorf("Rel() = %q", d.Rel())
			}
			d.Close()
		}
	}
}

// TestCanaryUntouched hands every method a symlink to the canary directory or
// file and checks that nothing outside the root changes.
func TestCanaryUntouched(t *testing.T) {
	eachResolver(t, func(t *testing.T) {
		f := newFixture(t)
		mustSymlink(t, filepath.Join(f.canary, "secret"), filepath.Join(f.dir, "a", "secretlink"))
		before := snapshot(t, f.canary)
		a := f.openDir(t, "a")
		root := f.openDir(t, ".")

		calls := []struct {
			name string
			call func() error
			want error // nil: the call may succeed, it acts on the link itself
		}{
			{"OpenDir", func() error { _, err := a.OpenDir("out"); return err }, ErrSymlink},
			{"Root.OpenDir", func() error { _, err := f.root.OpenDir("a/out/sub"); return err }, ErrSymlink},
			{"Root.Lstat", func() error { _, err := f.root.Lstat("a/out/secret"); return err }, ErrSymlink},
			{"OpenFile", func() error { _, err := a.OpenFile("secretlink"); return err }, ErrSymlink},
			{"Chmod file", func() error { return a.Chmod("secretlink", 0o777) }, ErrSymlink},
			{"Chmod dir", func() error { return a.Chmod("out", 0o777) }, ErrSymlink},
			{"Mkdir", func() error { return a.Mkdir("out", 0o777) }, fs.ErrExist},
			{"Symlink", func() error { return a.Symlink("x", "out") }, fs.ErrExist},
			{"Rmdir", func() error { return a.Rmdir("out") }, syscall.ENOTDIR},
			{"Readlink", func() error { _, err := a.Readlink("out"); return err }, nil},
			{"Lstat", func() error { _, err := a.Lstat("out"); return err }, nil},
			{"Rename", func() error { return a.Rename("up", root, "moved") }, nil},
			{"Exchange", func() error { return a.Exchange("secretlink", a, "in") }, nil},
			{"Unlink", func() error { return a.Unlink("out") }, nil},
			{"Unlink moved", func() error { return root.Unlink("moved") }, nil},
			{"Unlink exchanged", func() error { return a.Unlink("in") }, nil},
		}
		for _, c := range calls {
			err := c.call()
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("%s = %v, want %v", c.name, err, c.want)
			}
			if after := snapshot(t, f.canary); after != before {
				t.Fatalf("%s changed the canary:\n%s\nwant\n%s", c.name, after, before)
			}
		}
	})
}

func TestLstat(t *testing.T) {
	f := newFixture(t)
	for _, rel := range []string{".", "file", "a/b/file", "a/out", "a/b"} {
		got, err := f.root.Lstat(rel)
		if err != nil {
			t.Fatalf("Lstat(%q): %v", rel, err)
		}
		p := filepath.Join(f.dir, rel)
		info, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		want := Stat{
			Mode:  info.Mode(),
			Size:  info.Size(),
			Ino:   uint64(st.Ino),
			Dev:   uint64(st.Dev),
			Nlink: uint64(st.Nlink),
			UID:   st.Uid,
			GID:   st.Gid,
			Mtime: info.ModTime().UnixNano(),
			Ctime: st.Ctim.Nano(),
		}
		if got != want {
			t.Errorf("Lstat(%q) = %+v, want %+v", rel, got, want)
		}
	}
	if st, _ := f.root.Lstat("a/out"); !st.IsSymlink() || st.IsDir() {
		t.Errorf("Lstat(a/out) mode = %v, want a symlink", st.Mode)
	}
	if _, err := f.root.Lstat("a/b/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Lstat(missing) = %v, want ErrNotExist", err)
	}
}

func TestFileMode(t *testing.T) {
	tests := []struct {
		raw  uint32
		want fs.FileMode
	}{
		{unix.S_IFREG | 0o644, 0o644},
		{unix.S_IFDIR | 0o755, fs.ModeDir | 0o755},
		{unix.S_IFLNK | 0o777, fs.ModeSymlink | 0o777},
		{unix.S_IFIFO | 0o600, fs.ModeNamedPipe | 0o600},
		{unix.S_IFSOCK | 0o755, fs.ModeSocket | 0o755},
		{unix.S_IFCHR | 0o666, fs.ModeDevice | fs.ModeCharDevice | 0o666},
		{unix.S_IFBLK | 0o660, fs.ModeDevice | 0o660},
		{unix.S_IFREG | unix.S_ISUID | unix.S_ISGID | 0o755, fs.ModeSetuid | fs.ModeSetgid | 0o755},
		{unix.S_IFDIR | unix.S_ISVTX | 0o777, fs.ModeDir | fs.ModeSticky | 0o777},
	}
	for _, tt := range tests {
		got := fileMode(tt.raw)
		if got != tt.want {
			t.Errorf("fileMode(%#o) = %v, want %v", tt.raw, got, tt.want)
		}
		if back := unixPerm(got); back != tt.raw&^unix.S_IFMT {
			t.Errorf("unixPerm(%v) = %#o, want %#o", got, back, tt.raw&^unix.S_IFMT)
		}
	}
}

func TestOpenFile(t *testing.T) {
	f := newFixture(t)
	b := f.openDir(t, "a/b")
	if err := unix.Mkfifo(filepath.Join(f.dir, "a", "b", "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, "file", filepath.Join(f.dir, "a", "b", "link"))

	file, err := b.OpenFile("file")
	if err != nil {
		t.Fatal(err)
	}
	flags, err := unix.FcntlInt(file.Fd(), unix.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	if flags&unix.O_NONBLOCK != 0 {
		t.Error("OpenFile left O_NONBLOCK set")
	}
	data, err := io.ReadAll(file)
	file.Close()
	if err != nil || string(data) != "data" {
		t.Errorf("read %q, %v; want %q", data, err, "data")
	}

	tests := []struct {
		name string
		want []error
	}{
		{"fifo", []error{ErrNotRegular}},
		{"c", []error{ErrNotRegular}},
		{"link", []error{ErrNotRegular, ErrSymlink}},
		{"missing", []error{fs.ErrNotExist}},
		{"../file", []error{ErrInvalidPath}},
	}
	for _, tt := range tests {
		done := make(chan error, 1)
		go func() {
			file, err := b.OpenFile(tt.name)
			if err == nil {
				file.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			for _, want := range tt.want {
				if !errors.Is(err, want) {
					t.Errorf("OpenFile(%q) = %v, want %v", tt.name, err, want)
				}
			}
		case <-time.After(wtxtest.Patience(t)):
			t.Fatalf("OpenFile(%q) blocked", tt.name)
		}
	}
}

func TestCreateTempRenameNoReplace(t *testing.T) {
	f := newFixture(t)
	b := f.openDir(t, "a/b")
	tmp, name, err := b.CreateTemp(".wtx-")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(name, ".wtx-") || len(name) <= len(".wtx-") {
		t.Errorf("temp name %q", name)
	}
	if _, err := tmp.WriteString("new"); err != nil {
		t.Fatal(err)
	}
	if err := tmp.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := b.Lstat(name)
	if err != nil || st.Mode&0o077 != 0 || !st.IsRegular() {
		t.Errorf("temp file mode %v, %v; want regular, no group/other bits", st.Mode, err)
	}

	err = b.RenameNoReplace(name, b, "file")
	var le *os.LinkError
	if !errors.Is(err, fs.ErrExist) || !errors.As(err, &le) || le.Old != "a/b/"+name || le.New != "a/b/file" {
		t.Errorf("RenameNoReplace onto existing = %v, want ErrExist naming both paths", err)
	}
	if got := readFile(t, filepath.Join(f.dir, "a", "b", "file")); got != "data" {
		t.Errorf("target = %q after refused rename", got)
	}
	if got := readFile(t, filepath.Join(f.dir, "a", "b", name)); got != "new" {
		t.Errorf("temp = %q after refused rename", got)
	}

	c := f.openDir(t, "a/b/c")
	if err := b.RenameNoReplace(name, c, "fresh"); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(f.dir, "a", "b", "c", "fresh")); got != "new" {
		t.Errorf("renamed file = %q", got)
	}
	if err := c.Rename("fresh", b, "file"); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(f.dir, "a", "b", "file")); got != "new" {
		t.Errorf("replaced file = %q", got)
	}
	if _, _, err := b.CreateTemp("a/"); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("CreateTemp with slash = %v", err)
	}
}

func TestExchange(t *testing.T) {
	f := newFixture(t)
	b := f.openDir(t, "a/b")
	top := f.openDir(t, ".")
	if err := b.Exchange("file", top, "file"); err != nil {
		if errors.Is(err, errors.ErrUnsupported) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(f.dir, "file")); got != "data" {
		t.Errorf("root file = %q, want data", got)
	}
	if got := readFile(t, filepath.Join(f.dir, "a", "b", "file")); got != "top" {
		t.Errorf("a/b/file = %q, want top", got)
	}
	// A directory and a file swap too.
	if err := b.Exchange("c", b, "file"); err != nil {
		t.Fatal(err)
	}
	if st, _ := b.Lstat("file"); !st.IsDir() {
		t.Errorf("after exchange a/b/file is %v, want a directory", st.Mode)
	}
	if err := b.Exchange("file", b, "missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Exchange with missing = %v, want ErrNotExist", err)
	}
}

func TestChmod(t *testing.T) {
	f := newFixture(t)
	b := f.openDir(t, "a/b")
	a := f.openDir(t, "a")
	if err := unix.Mkfifo(filepath.Join(f.dir, "a", "b", "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, "file", filepath.Join(f.dir, "a", "b", "link"))
	tests := []struct {
		dir  *Dir
		name string
		perm fs.FileMode
		want error
	}{
		{b, "file", 0o755, nil},
		{b, "file", 0o000, nil},
		{b, "file", 0o640, nil}, // from 0o000: unreadable for a normal user
		{b, "file", 0o755 | fs.ModeSetuid, nil},
		{b, "c", 0o700, nil},
		{b, "c", 0o777 | fs.ModeSticky, nil},
		{b, "link", 0o777, ErrSymlink},
		{a, "in", 0o700, ErrSymlink},
		{b, "fifo", 0o600, ErrNotRegular},
		{b, "missing", 0o600, fs.ErrNotExist},
	}
	for _, tt := range tests {
		err := tt.dir.Chmod(tt.name, tt.perm)
		if !errors.Is(err, tt.want) {
			t.Errorf("Chmod(%q, %v) = %v, want %v", tt.name, tt.perm, err, tt.want)
			continue
		}
		if tt.want != nil {
			continue
		}
		st, err := tt.dir.Lstat(tt.name)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode &^ fs.ModeType; got != tt.perm&^fs.ModeType {
			t.Errorf("Chmod(%q, %v) left mode %v", tt.name, tt.perm, st.Mode)
		}
	}
	// The symlink's target kept the last mode set on it.
	if st, _ := b.Lstat("file"); st.Mode != fs.ModeSetuid|0o755 {
		t.Errorf("symlink target mode = %v, want %v", st.Mode, fs.ModeSetuid|0o755)
	}
	if st, _ := b.Lstat("c"); st.Mode != fs.ModeDir|fs.ModeSticky|0o777 {
		t.Errorf("a/b/c mode = %v", st.Mode)
	}
}

func TestMkdirUmask(t *testing.T) {
	f := newFixture(t)
	b := f.openDir(t, "a/b")
	old := unix.Umask(0o777)
	defer unix.Umask(old)
	tests := []struct {
		name string
		perm fs.FileMode
	}{
		{"d755", 0o755},
		{"d700", 0o700},
		{"d000", 0},
		{"d2775", 0o775 | fs.ModeSetgid},
	}
	for _, tt := range tests {
		if err := b.Mkdir(tt.name, tt.perm); err != nil {
			t.Fatalf("Mkdir(%q): %v", tt.name, err)
		}
		st, err := b.Lstat(tt.name)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode != fs.ModeDir|tt.perm {
			t.Errorf("Mkdir(%q, %v) made %v", tt.name, tt.perm, st.Mode)
		}
	}
	if err := b.Mkdir("d755", 0o755); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Mkdir over existing = %v, want ErrExist", err)
	}
}

func TestReadDirSorted(t *testing.T) {
	f := newFixture(t)
	d := f.openDir(t, "a/b/c")
	names := []string{"b", "a", "C", "é", "_", "a.b", "10", "9", "\x01"}
	for _, n := range names {
		mustWrite(t, filepath.Join(f.dir, "a", "b", "c", n), "", 0o644)
	}
	want := slices.Clone(names)
	slices.Sort(want)
	for range 2 { // a second call must not see an exhausted offset
		got, err := d.ReadDir()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("ReadDir = %q, want %q", got, want)
		}
	}
}

func TestSymlinkReadlink(t *testing.T) {
	f := newFixture(t)
	d := f.openDir(t, "a/b/c")
	targets := []string{"../../etc/passwd", "/abs/olute", "dangling", "with\nnewline", strings.Repeat("t/", 2000) + "x"}
	for i, target := range targets {
		name := "l" + string(rune('0'+i))
		if err := d.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
		got, err := d.Readlink(name)
		if err != nil || got != target {
			t.Errorf("Readlink(%q) = %q, %v; want %q", name, got, err, target)
		}
	}
	if _, err := d.Readlink("missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Readlink(missing) = %v", err)
	}
}

func TestUnlinkRmdir(t *testing.T) {
	f := newFixture(t)
	b := f.openDir(t, "a/b")
	if err := b.Unlink("c"); err == nil {
		t.Error("Unlink removed a directory")
	}
	if err := b.Rmdir("file"); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("Rmdir(file) = %v, want ENOTDIR", err)
	}
	if err := b.Unlink("file"); err != nil {
		t.Error(err)
	}
	if err := b.Rmdir("c"); err != nil {
		t.Error(err)
	}
	if err := b.Unlink("file"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("second Unlink = %v, want ErrNotExist", err)
	}
	if names, _ := b.ReadDir(); len(names) != 0 {
		t.Errorf("left %q", names)
	}
	if err := b.Sync(); err != nil {
		t.Error(err)
	}
}

func TestInvalidNames(t *testing.T) {
	f := newFixture(t)
	d := f.openDir(t, "a")
	for _, name := range []string{"", ".", "..", "b/c", "/etc", "x\x00"} {
		calls := map[string]error{
			"Lstat":           func() error { _, err := d.Lstat(name); return err }(),
			"Readlink":        func() error { _, err := d.Readlink(name); return err }(),
			"OpenDir":         func() error { _, err := d.OpenDir(name); return err }(),
			"OpenFile":        func() error { _, err := d.OpenFile(name); return err }(),
			"Mkdir":           d.Mkdir(name, 0o755),
			"Symlink":         d.Symlink("x", name),
			"Unlink":          d.Unlink(name),
			"Rmdir":           d.Rmdir(name),
			"Chmod":           d.Chmod(name, 0o755),
			"Rename old":      d.Rename(name, d, "x"),
			"Rename new":      d.Rename("in", d, name),
			"RenameNoReplace": d.RenameNoReplace("in", d, name),
			"Exchange":        d.Exchange(name, d, "in"),
		}
		for op, err := range calls {
			if !errors.Is(err, ErrInvalidPath) {
				t.Errorf("%s(%q) = %v, want ErrInvalidPath", op, name, err)
			}
		}
	}
	if _, err := os.Lstat(filepath.Join(f.dir, "a", "in")); err != nil {
		t.Errorf("a/in disappeared: %v", err)
	}
}

func TestWriteFileAtomic(t *testing.T) {
	old := unix.Umask(0o077)
	defer unix.Umask(old)
	dir := t.TempDir()
	p := filepath.Join(dir, "manifest")
	for i, data := range []string{"first", "second, longer", ""} {
		perm := fs.FileMode(0o644 - i)
		if err := WriteFileAtomic(p, []byte(data), perm); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, p); got != data {
			t.Errorf("content = %q, want %q", got, data)
		}
		info, err := os.Lstat(p)
		if err != nil || info.Mode() != perm {
			t.Errorf("mode = %v, %v; want %v", info.Mode(), err, perm)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Errorf("directory holds %v, %v; want only the file", entries, err)
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "x"), []byte("x"), 0o644); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("WriteFileAtomic into missing dir = %v", err)
	}
	if err := SyncDir(dir); err != nil {
		t.Error(err)
	}
	if err := SyncDir(p); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("SyncDir(file) = %v, want ENOTDIR", err)
	}
}

// TestFIFOContentNeverRead makes sure a FIFO swapped in for a file is refused
// while a writer is waiting, without consuming its data.
func TestFIFOContentNeverRead(t *testing.T) {
	f := newFixture(t)
	b := f.openDir(t, "a/b")
	fifo := filepath.Join(f.dir, "a", "b", "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	// Hold the read side open so a writer can open without blocking.
	rfd, err := unix.Open(fifo, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(rfd)
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteString("payload"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.OpenFile("fifo"); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("OpenFile(fifo) = %v", err)
	}
	buf := make([]byte, 16)
	n, err := unix.Read(rfd, buf)
	if err != nil || !bytes.Equal(buf[:n], []byte("payload")) {
		t.Errorf("FIFO holds %q, %v; want payload intact", buf[:n], err)
	}
}

// TestReadDirConcurrent reads one directory from several goroutines at
// once: only one of them may use the handle's own offset, so each gets
// every name, over several reads of the directory.
func TestReadDirConcurrent(t *testing.T) {
	f := newFixture(t)
	var want []string
	for i := range 3000 { // several getdents calls' worth
		n := fmt.Sprintf("entry-with-a-longish-name-%05d", i)
		mustWrite(t, filepath.Join(f.dir, "a", "b", "c", n), "", 0o644)
		want = append(want, n)
	}
	slices.Sort(want)
	for round := range 5 {
		d := f.openDir(t, "a/b/c")
		var wg sync.WaitGroup
		got := make([][]string, 6)
		errs := make([]error, 6)
		for g := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[g], errs[g] = d.ReadDir()
			}()
		}
		wg.Wait()
		for g := range got {
			if errs[g] != nil || !slices.Equal(got[g], want) {
				t.Fatalf("round %d, reader %d: %d names, %v; want %d", round, g, len(got[g]), errs[g], len(want))
			}
		}
	}
}
