//go:build unix

package stage

import (
	"errors"
	"io/fs"
	"path/filepath"
	"syscall"

	"github.com/wtx-dev/wtx/internal/fsx"
)

// RemoveTree removes dir and everything beneath it, never following a
// symlink or crossing a mount: each directory is opened beneath its
// parent's handle, given its owner's access when it lacks it (overlayfs
// leaves its work directories with none), emptied, and removed. A stage's
// directory holds what its commands left there, so it is removed this way.
// A dir already gone is no error.
func RemoveTree(dir string) error {
	parent, err := fsx.OpenRoot(filepath.Dir(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer parent.Close()
	top, err := parent.OpenDir(".")
	if err != nil {
		return err
	}
	defer top.Close()
	return removeEntry(top, filepath.Base(dir))
}

// removeEntry removes name in d, and all it holds when it is a directory.
func removeEntry(d *fsx.Dir, name string) error {
	err := d.Unlink(name)
	switch {
	case err == nil, errors.Is(err, fs.ErrNotExist):
		return nil
	case !errors.Is(err, syscall.EISDIR) && !errors.Is(err, syscall.EPERM):
		return err // EPERM: what some systems say for a directory
	}
	st, err := d.Lstat(name)
	if err != nil || !st.IsDir() {
		return err
	}
	if st.Mode.Perm()&0o700 != 0o700 {
		if err := d.Chmod(name, st.Mode.Perm()|0o700); err != nil {
			return err
		}
	}
	sub, err := d.OpenDir(name)
	if err != nil {
		return err
	}
	names, err := sub.ReadDir()
	for _, n := range names {
		if err != nil {
			break
		}
		err = removeEntry(sub, n)
	}
	_ = sub.Close() // opened to read: nothing to lose
	if err != nil {
		return err
	}
	if err := d.Rmdir(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
