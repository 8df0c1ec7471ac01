//go:build unix

package fsx

import (
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// Stat is what an lstat reports about one directory entry, never following a
// symlink.
type Stat struct {
	// Mode holds the type bits and the permission bits (including
	// fs.ModeSetuid, fs.ModeSetgid and fs.ModeSticky) as an fs.FileMode.
	Mode  fs.FileMode
	Size  int64
	Ino   uint64
	Dev   uint64
	Nlink uint64
	UID   uint32
	GID   uint32
	Mtime int64 // nanoseconds since the Unix epoch
	Ctime int64 // nanoseconds since the Unix epoch
}

// IsDir reports whether the entry is a directory.
func (s Stat) IsDir() bool { return s.Mode.IsDir() }

// IsRegular reports whether the entry is a regular file.
func (s Stat) IsRegular() bool { return s.Mode.IsRegular() }

// IsSymlink reports whether the entry is a symlink.
func (s Stat) IsSymlink() bool { return s.Mode&fs.ModeSymlink != 0 }

// statOf converts a raw stat record.
func statOf(st *unix.Stat_t) Stat {
	return Stat{
		Mode:  fileMode(uint32(st.Mode)),
		Size:  st.Size,
		Ino:   uint64(st.Ino),
		Dev:   uint64(st.Dev),
		Nlink: uint64(st.Nlink),
		UID:   st.Uid,
		GID:   st.Gid,
		Mtime: st.Mtim.Nano(),
		Ctime: st.Ctim.Nano(),
	}
}

// fileMode converts st_mode to an fs.FileMode.
func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	default:
		mode |= fs.ModeIrregular
	}
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// unixPerm converts the permission bits of an fs.FileMode, including setuid,
// setgid and sticky, to st_mode bits.
func unixPerm(perm fs.FileMode) uint32 {
	m := uint32(perm.Perm())
	if perm&fs.ModeSetuid != 0 {
		m |= unix.S_ISUID
	}
	if perm&fs.ModeSetgid != 0 {
		m |= unix.S_ISGID
	}
	if perm&fs.ModeSticky != 0 {
		m |= unix.S_ISVTX
	}
	return m
}

// fstat stats an open descriptor.
func fstat(fd int) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := ignoringEINTR(func() error { return unix.Fstat(fd, &st) })
	return st, err
}

// lstatAt stats name in dirfd without following a symlink.
func lstatAt(dirfd int, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := ignoringEINTR(func() error { return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) })
	return st, err
}

// ignoringEINTR retries fn while it fails with EINTR.
func ignoringEINTR(fn func() error) error {
	for {
		err := fn()
		if err != unix.EINTR {
			return err
		}
	}
}

// openAt opens name in dirfd, retrying on EINTR.
func openAt(dirfd int, name string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags|unix.O_CLOEXEC, mode)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// StatOfFile is the stat record of the open file f.
func StatOfFile(f *os.File) (Stat, error) {
	var st unix.Stat_t
	if err := ignoringEINTR(func() error { return unix.Fstat(int(f.Fd()), &st) }); err != nil {
		return Stat{}, &fs.PathError{Op: "fstat", Path: f.Name(), Err: err}
	}
	return statOf(&st), nil
}
