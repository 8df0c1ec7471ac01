//go:build unix && !linux

package fsx

import (
	"io/fs"

	"golang.org/x/sys/unix"
)

// resolveDir opens the directory rel beneath rootfd one component at a time.
func resolveDir(rootfd int, rel string, dev uint64, mnt mountRef) (int, error) {
	return walkDir(rootfd, ".", rel, dev, mnt)
}

// mountOf reports no mount id: only the device is compared on this system.
func mountOf(int) mountRef { return mountRef{} }

// devAndMount returns the device of the open fd; no mount id is known here.
func devAndMount(fd int, _ bool) (uint64, mountRef, error) {
	st, err := fstat(fd)
	return uint64(st.Dev), mountRef{}, err
}

// chmodUnreadable changes the mode of name when it cannot be opened for
// reading. fchmodat with AT_SYMLINK_NOFOLLOW never reaches through a symlink
// here; the entry is checked just before, which leaves a window in which it can
// be replaced by another file of the same directory.
func chmodUnreadable(dirfd int, rel, name string, perm fs.FileMode, dir bool, want *unix.Stat_t) error {
	st, err := lstatAt(dirfd, name)
	if err != nil {
		return &fs.PathError{Op: "chmod", Path: rel, Err: err}
	}
	m := fileMode(uint32(st.Mode))
	if dir && !m.IsDir() || !dir && !m.IsRegular() ||
		want != nil && (st.Ino != want.Ino || st.Dev != want.Dev) {
		return &fs.PathError{Op: "chmod", Path: rel, Err: ErrChanged}
	}
	err = ignoringEINTR(func() error {
		return unix.Fchmodat(dirfd, name, unixPerm(perm), unix.AT_SYMLINK_NOFOLLOW)
	})
	if err != nil {
		return &fs.PathError{Op: "chmod", Path: rel, Err: err}
	}
	return nil
}
