package fsx

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// mountOrSkip mounts source on target and unmounts it when the test ends. It
// skips the test when not root or when mounting is not permitted.
func mountOrSkip(t *testing.T, source, target, fstype string, flags uintptr) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	if err := unix.Mount(source, target, fstype, flags, ""); err != nil {
		t.Skipf("mount %s: %v", target, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(target, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", target, err)
		}
	})
}

func TestMountCrossing(t *testing.T) {
	eachResolver(t, func(t *testing.T) {
		f := newFixture(t)
		tmpfs := filepath.Join(f.dir, "a", "b", "c")
		mountOrSkip(t, "tmpfs", tmpfs, "tmpfs", 0)
		mustMkdir(t, filepath.Join(tmpfs, "inner"))
		mustWrite(t, filepath.Join(tmpfs, "f"), "x", 0o644)

		// A bind mount of a directory of the same file system keeps st_dev:
		// only RESOLVE_NO_XDEV or the mount id tells it apart.
		bind := filepath.Join(f.dir, "bind")
		mustMkdir(t, bind)
		mountOrSkip(t, filepath.Join(f.dir, "a"), bind, "", unix.MS_BIND)
		sameMountKnown := mountOf(f.root.fd).ok

		for _, rel := range []string{"a/b/c", "a/b/c/inner", "bind", "bind/b"} {
			if rel[0] == 'b' && openat2Off.Load() && !sameMountKnown {
				continue // no mount id on this kernel: the walk sees one device
			}
			if d, err := f.root.OpenDir(rel); !errors.Is(err, ErrCrossDevice) {
				t.Errorf("OpenDir(%q) = %v, want ErrCrossDevice", rel, err)
				if d != nil {
					d.Close()
				}
			}
		}
		b := f.openDir(t, "a/b")
		if d, err := b.OpenDir("c"); !errors.Is(err, ErrCrossDevice) {
			t.Errorf("Dir.OpenDir(c) = %v, want ErrCrossDevice", err)
			if d != nil {
				d.Close()
			}
		}
		// The directory holding the mount point is still usable.
		if names, err := b.ReadDir(); err != nil || len(names) != 2 {
			t.Errorf("ReadDir(a/b) = %q, %v", names, err)
		}
	})
}

// TestOpenFileMountedFile checks that a file bind-mounted from another file
// system is refused.
func TestOpenFileMountedFile(t *testing.T) {
	f := newFixture(t)
	tmpfs := t.TempDir()
	mountOrSkip(t, "tmpfs", tmpfs, "tmpfs", 0)
	mustWrite(t, filepath.Join(tmpfs, "other"), "other", 0o644)
	mountOrSkip(t, filepath.Join(tmpfs, "other"), filepath.Join(f.dir, "file"), "", unix.MS_BIND)
	d := f.openDir(t, ".")
	if file, err := d.OpenFile("file"); !errors.Is(err, ErrCrossDevice) {
		t.Errorf("OpenFile(bind-mounted file) = %v, want ErrCrossDevice", err)
		if file != nil {
			file.Close()
		}
	}
}

// TestRootRemoveAllMount checks that RemoveAll stops at a mount point: what
// is mounted there stays, and so does the way to it.
func TestRootRemoveAllMount(t *testing.T) {
	f := newFixture(t)
	mnt := filepath.Join(f.dir, "x", "m")
	mustMkdir(t, mnt)
	mustWrite(t, filepath.Join(f.dir, "x", "other"), "o", 0o600)
	mountOrSkip(t, "tmpfs", mnt, "tmpfs", 0)
	mustWrite(t, filepath.Join(mnt, "kept"), "kept", 0o600)
	if err := f.root.RemoveAll("x"); !errors.Is(err, ErrCrossDevice) {
		t.Fatalf("RemoveAll across a mount = %v, want ErrCrossDevice", err)
	}
	if got := readFile(t, filepath.Join(mnt, "kept")); got != "kept" {
		t.Errorf("the mounted file: %q", got)
	}
	if _, err := os.Lstat(filepath.Join(f.dir, "x", "other")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("what is beside the mount was not removed: %v", err)
	}
}
