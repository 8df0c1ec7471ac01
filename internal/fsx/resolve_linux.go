package fsx

import (
	"io/fs"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// openat2Off is set once openat2 is found missing or blocked, so later calls go
// straight to the walk. Tests set it to exercise the walk.
var openat2Off atomic.Bool

// resolveDir opens the directory rel beneath rootfd with openat2, falling back
// to walkDir when openat2 is unavailable.
func resolveDir(rootfd int, rel string, dev uint64, mnt mountRef) (int, error) {
	if rel == "." || openat2Off.Load() || follow {
		return walkDir(rootfd, ".", rel, dev, mnt)
	}
	how := unix.OpenHow{
		Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS |
			unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	}
	for range 16 {
		fd, err := unix.Openat2(rootfd, rel, &how)
		switch err {
		case nil:
			return fd, nil
		case unix.EINTR, unix.EAGAIN:
			// EAGAIN: a concurrent rename raced the lookup; retry.
			continue
		case unix.ENOSYS, unix.EPERM, unix.E2BIG, unix.EINVAL:
			// Old kernel, seccomp filter, or unknown resolve flags.
			if err != unix.EPERM {
				openat2Off.Store(true)
			}
			return walkDir(rootfd, ".", rel, dev, mnt)
		case unix.ELOOP, unix.ENOTDIR, unix.ENOENT:
			// openat2 does not say which component failed, and reports a
			// final symlink as ENOTDIR: the walk names the culprit.
			return diagnose(rootfd, rel, dev, mnt, err)
		case unix.EXDEV:
			return -1, &fs.PathError{Op: "openat2", Path: rel, Err: ErrCrossDevice}
		default:
			return -1, &fs.PathError{Op: "openat2", Path: rel, Err: err}
		}
	}
	return walkDir(rootfd, ".", rel, dev, mnt)
}

// diagnose reruns a failed openat2 lookup as a walk to name the component
// that failed. Should the walk succeed (the tree changed in between), the
// openat2 error stands.
func diagnose(rootfd int, rel string, dev uint64, mnt mountRef, err error) (int, error) {
	fd, werr := walkDir(rootfd, ".", rel, dev, mnt)
	if werr != nil {
		return -1, werr
	}
	unix.Close(fd)
	switch err {
	case unix.ELOOP:
		err = ErrSymlink
	case unix.ENOTDIR:
		err = ErrNotDir
	}
	return -1, &fs.PathError{Op: "openat2", Path: rel, Err: err}
}

// mountOf reports the mount id of the object open at fd (Linux 5.8 and later).
// devAndMount returns the device of the open fd and, when wantMount is
// set, its mount id where the system reports one: one statx call, where an
// fstat and a statx would be two.
func devAndMount(fd int, wantMount bool) (uint64, mountRef, error) {
	if !wantMount {
		st, err := fstat(fd)
		return uint64(st.Dev), mountRef{}, err
	}
	var stx unix.Statx_t
	err := ignoringEINTR(func() error {
		return unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &stx)
	})
	if err != nil {
		st, err := fstat(fd) // no statx here: the device alone
		return uint64(st.Dev), mountRef{}, err
	}
	// The device numbers are filled whatever the mask asked for.
	dev := unix.Mkdev(stx.Dev_major, stx.Dev_minor)
	if stx.Mask&unix.STATX_MNT_ID == 0 {
		return dev, mountRef{}, nil
	}
	return dev, mountRef{id: stx.Mnt_id, ok: true}, nil
}

func mountOf(fd int) mountRef {
	var stx unix.Statx_t
	err := ignoringEINTR(func() error {
		return unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &stx)
	})
	if err != nil || stx.Mask&unix.STATX_MNT_ID == 0 {
		return mountRef{}
	}
	return mountRef{id: stx.Mnt_id, ok: true}
}

// chmodUnreadable changes the mode of name when it cannot be opened for
// reading: it is opened with O_PATH|O_NOFOLLOW, checked, and changed through
// its /proc/self/fd entry, which names exactly that inode.
func chmodUnreadable(dirfd int, rel, name string, perm fs.FileMode, dir bool, want *unix.Stat_t) error {
	fd, err := openAt(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW, 0)
	if err != nil {
		return &fs.PathError{Op: "chmod", Path: rel, Err: err}
	}
	defer unix.Close(fd)
	if err := checkKind(fd, rel, dir, want); err != nil {
		return err
	}
	proc := "/proc/self/fd/" + strconv.Itoa(fd)
	if err := ignoringEINTR(func() error { return unix.Fchmodat(unix.AT_FDCWD, proc, unixPerm(perm), 0) }); err != nil {
		return &fs.PathError{Op: "chmod", Path: rel, Err: err}
	}
	return nil
}
