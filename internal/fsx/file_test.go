//go:build unix

package fsx

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFileReadsWholeFiles reads files of sizes around the small-file bound
// through ReadSmall and ReadTo: every byte comes back, and a file that
// grew after it was opened is read to its new end.
func TestFileReadsWholeFiles(t *testing.T) {
	dir := t.TempDir()
	root, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	d, err := root.OpenDir(".")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, n := range []int{0, 1, 4095, 4096, smallFile - 1, smallFile, smallFile + 1, 300 << 10} {
		want := bytes.Repeat([]byte{byte(n), 'x', 0}, n/3+1)[:n]
		name := "f"
		if err := os.WriteFile(filepath.Join(dir, name), want, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := d.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		if f.Stat().Size != int64(n) {
			t.Errorf("%d: stat size %d", n, f.Stat().Size)
		}
		got, ok, err := f.ReadSmall(nil)
		if err != nil || ok != (n < smallFile) || ok && !bytes.Equal(got, want) {
			t.Errorf("%d: ReadSmall = %d bytes, %v, %v", n, len(got), ok, err)
		}
		var buf bytes.Buffer
		if m, err := f.ReadTo(&buf, nil); err != nil || m != int64(n) || !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("%d: ReadTo = %d, %v", n, m, err)
		}
		// Grown after it was opened: read to the new end.
		if err := os.WriteFile(filepath.Join(dir, name), append(want, "more"...), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, ok, err := f.ReadSmall(nil); ok && (err != nil || string(got) != string(want)+"more") {
			t.Errorf("%d: ReadSmall after growth = %q…, %v", n, got[max(0, len(got)-4):], err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); !errors.Is(err, os.ErrClosed) {
			t.Errorf("second Close: %v", err)
		}
	}
}

// TestFileOpenRefuses checks that Open refuses what OpenFile refuses: a
// symlink, a directory and a FIFO, without blocking on the FIFO.
func TestFileOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "t"), []byte("t"), 0o644))
	must(os.Symlink("t", filepath.Join(dir, "l")))
	must(os.Mkdir(filepath.Join(dir, "d"), 0o755))
	must(unix.Mkfifo(filepath.Join(dir, "p"), 0o644))
	root, err := OpenRoot(dir)
	must(err)
	defer root.Close()
	d, err := root.OpenDir(".")
	must(err)
	defer d.Close()
	for _, name := range []string{"l", "d", "p"} {
		if f, err := d.Open(name); !errors.Is(err, ErrNotRegular) {
			t.Errorf("Open(%s) = %v, %v; want ErrNotRegular", name, f, err)
		}
	}
	if _, err := d.Open("missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open(missing) = %v", err)
	}
	if _, err := d.Open("../t"); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("Open(../t) = %v", err)
	}
}

// TestCreateTempFileMode creates files with modes the umask keeps whole
// and ones it does not: ExactPerm says which need their fchmod.
func TestCreateTempFileMode(t *testing.T) {
	dir := t.TempDir()
	root, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	d, err := root.OpenDir(".")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if ExactPerm(0o600) {
		t.Error("ExactPerm before FixUmask: a library's host may change the umask")
	}
	old := unix.Umask(0o022)
	defer unix.Umask(old)
	FixUmask()
	defer umaskFixed.Store(false)
	if !ExactPerm(0o644) || ExactPerm(0o666) {
		t.Errorf("under umask 022: ExactPerm(0644) %v, ExactPerm(0666) %v", ExactPerm(0o644), ExactPerm(0o666))
	}
	for _, perm := range []fs.FileMode{0o644, 0o400, 0o755, 0o666, 0o777, 0} {
		f, name, err := d.CreateTempFile("x-", perm)
		if err != nil {
			t.Fatal(err)
		}
		if !ExactPerm(perm) {
			if err := f.Chmod(perm); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.WriteAt([]byte("data"), 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != perm {
			t.Errorf("created with %04o (exact %v): mode %04o", perm, ExactPerm(perm), fi.Mode().Perm())
		}
	}
	if ExactPerm(0o644 | fs.ModeSetuid) {
		t.Error("a setuid mode is never exact")
	}
}

// TestReadSmallFile reads files below, at and above the buffer's length:
// below, the content comes back from one read; at or above, the file comes
// back open with its size, and reads as a stream to its end.
func TestReadSmallFile(t *testing.T) {
	dir := t.TempDir()
	buf := make([]byte, 100)
	for _, n := range []int{0, 1, 99, 100, 101, 5000} {
		want := bytes.Repeat([]byte{'a', byte(n)}, n)[:n]
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, want, 0o644); err != nil {
			t.Fatal(err)
		}
		data, large, err := ReadSmallFile(p, buf)
		if err != nil {
			t.Fatalf("%d: %v", n, err)
		}
		if n < len(buf) {
			if large != nil || !bytes.Equal(data, want) {
				t.Errorf("%d: got %d bytes, large %v", n, len(data), large != nil)
			}
			continue
		}
		if large == nil || large.Stat().Size != int64(n) {
			t.Fatalf("%d: want the file open with its size, got %v", n, large)
		}
		var got bytes.Buffer
		if _, err := large.ReadTo(&got, nil); err != nil || !bytes.Equal(got.Bytes(), want) {
			t.Errorf("%d: streamed %d bytes, %v", n, got.Len(), err)
		}
		large.Close()
	}
	if err := os.Symlink("f", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadSmallFile(filepath.Join(dir, "l"), buf); err == nil {
		t.Error("a symlink was followed")
	}
	if _, _, err := ReadSmallFile(dir, buf); err == nil {
		t.Error("a directory was read")
	}
}
