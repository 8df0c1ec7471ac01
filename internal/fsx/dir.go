//go:build unix

package fsx

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/failpoint"
)

// Dir is an open directory handle beneath a [Root]. Every method takes a single
// path component name: no slash, not "." or "..", no NUL. Any other name is
// refused with an error wrapping [ErrInvalidPath] before any system call. No
// method follows a symlink at name.
type Dir struct {
	fd  int
	rel string
	dev uint64
	mnt mountRef
	// listed is set once ReadDir has read fd itself (see ReadDir).
	listed atomic.Bool
}

// Close closes the directory handle.
func (d *Dir) Close() error {
	if d.fd < 0 {
		return &fs.PathError{Op: "close", Path: d.rel, Err: os.ErrClosed}
	}
	err := unix.Close(d.fd)
	d.fd = -1
	if err != nil {
		return &fs.PathError{Op: "close", Path: d.rel, Err: err}
	}
	return nil
}

// Rel returns the workspace-relative path the directory was opened with.
func (d *Dir) Rel() string { return d.rel }

// Fd returns the file descriptor of the directory. It stays owned by d.
func (d *Dir) Fd() int { return d.fd }

// check validates name for operation op and returns its rel path.
func (d *Dir) check(op, name string) (string, error) {
	if err := validName(name); err != nil {
		return "", &fs.PathError{Op: op, Path: d.rel, Err: err}
	}
	return joinRel(d.rel, name), nil
}

// Lstat describes name without following a symlink.
func (d *Dir) Lstat(name string) (Stat, error) {
	rel, err := d.check("lstat", name)
	if err != nil {
		return Stat{}, err
	}
	st, err := lstatAt(d.fd, name)
	if err != nil {
		return Stat{}, &fs.PathError{Op: "lstat", Path: rel, Err: err}
	}
	return statOf(&st), nil
}

// Readlink returns the target of the symlink name, byte for byte.
func (d *Dir) Readlink(name string) (string, error) {
	rel, err := d.check("readlink", name)
	if err != nil {
		return "", err
	}
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		var n int
		err := ignoringEINTR(func() (err error) {
			n, err = unix.Readlinkat(d.fd, name, buf)
			return err
		})
		if err != nil {
			return "", &fs.PathError{Op: "readlink", Path: rel, Err: err}
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// ReadDir returns the names in the directory, sorted bytewise, without "." and
// "..".
func (d *Dir) ReadDir() ([]string, error) {
	failpoint.Tally("readdir")
	// The first read uses d's own descriptor, whose offset no call has
	// moved (only ReadDir reads it, and only once this way); any later
	// or concurrent one reads a fresh open file description, so an offset
	// is never shared. Read with the raw calls: an *os.File would cost a
	// few more system calls per directory, and a walk opens thousands.
	fd, own := d.fd, d.listed.CompareAndSwap(false, true)
	if !own {
		var err error
		if fd, err = openAt(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0); err != nil {
			return nil, &fs.PathError{Op: "openat", Path: d.rel, Err: err}
		}
	}
	var err error
	bp := direntBufs.Get().(*[]byte)
	var names []string
	for {
		var n int
		err = ignoringEINTR(func() (err error) {
			n, err = unix.ReadDirent(fd, *bp)
			return err
		})
		if err != nil || n <= 0 {
			break
		}
		_, _, names = unix.ParseDirent((*bp)[:n], -1, names)
	}
	direntBufs.Put(bp)
	if !own {
		if cerr := unix.Close(fd); err == nil && cerr != nil {
			err = cerr
		}
	}
	if err != nil {
		return nil, fmt.Errorf("readdir %s: %w", d.rel, err)
	}
	slices.Sort(names)
	return names, nil
}

// direntBufs holds the buffers ReadDir reads directory entries into.
var direntBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// OpenDir opens the child directory name with the same rules as
// [Root.OpenDir].
func (d *Dir) OpenDir(name string) (*Dir, error) {
	rel, err := d.check("open", name)
	if err != nil {
		return nil, err
	}
	fd, err := openDirAt(d.fd, d.rel, name, d.dev, d.mnt)
	if err != nil {
		return nil, err
	}
	return &Dir{fd: fd, rel: rel, dev: d.dev, mnt: d.mnt}, nil
}

// OpenFile opens the regular file name for reading. It opens with O_NONBLOCK
// and O_NOFOLLOW, then refuses anything but a regular file with an error
// wrapping [ErrNotRegular], so a FIFO never blocks the reader. A symlink at
// name fails with an error wrapping both [ErrNotRegular] and [ErrSymlink]. The
// returned file is in blocking mode.
func (d *Dir) OpenFile(name string) (*os.File, error) {
	f, err := d.Open(name)
	if err != nil {
		return nil, err
	}
	// Back to blocking mode: F_SETFL sets only the status flags, and none
	// but O_NONBLOCK was asked for.
	if _, err := unix.FcntlInt(uintptr(f.fd), unix.F_SETFL, 0); err != nil {
		_ = f.Close() // the fcntl error is what the caller needs
		return nil, &fs.PathError{Op: "fcntl", Path: f.name, Err: err}
	}
	fd := f.fd
	f.fd = -1 // the *os.File owns it now
	return os.NewFile(uintptr(fd), f.name), nil
}

// CreateTemp creates a new file named prefix followed by random characters,
// with mode 0600 (less any umask bits), opened for writing, and returns it
// with its name. prefix+"x" must be a valid name.
func (d *Dir) CreateTemp(prefix string) (*os.File, string, error) {
	if _, err := d.check("create", prefix+"x"); err != nil {
		return nil, "", err
	}
	if err := injected("create", joinRel(d.rel, prefix+"*")); err != nil {
		return nil, "", err
	}
	for range 100 {
		name := prefix + strconv.FormatUint(rand.Uint64(), 36)
		if len(name) > MaxNameLen {
			return nil, "", &fs.PathError{Op: "create", Path: d.rel, Err: fmt.Errorf("%w: prefix too long", ErrInvalidPath)}
		}
		fd, err := openAt(d.fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, 0o600)
		if err == unix.EEXIST {
			continue
		}
		rel := joinRel(d.rel, name)
		if err != nil {
			return nil, "", &fs.PathError{Op: "create", Path: rel, Err: err}
		}
		return os.NewFile(uintptr(fd), rel), name, nil
	}
	return nil, "", &fs.PathError{Op: "create", Path: joinRel(d.rel, prefix+"*"), Err: fs.ErrExist}
}

// Mkdir creates the directory name with exactly the permission bits perm,
// whatever the umask.
func (d *Dir) Mkdir(name string, perm fs.FileMode) error {
	rel, err := d.check("mkdir", name)
	if err != nil {
		return err
	}
	if err := injected("mkdir", rel); err != nil {
		return err
	}
	// Owner access during creation lets the new directory be opened for the
	// fchmod below even when perm denies it.
	if err := ignoringEINTR(func() error { return unix.Mkdirat(d.fd, name, unixPerm(perm)|0o700) }); err != nil {
		return &fs.PathError{Op: "mkdir", Path: rel, Err: err}
	}
	if err := d.chmodKind(rel, name, perm, true, nil); err != nil {
		// Mkdir creates a directory with its bits or none at all.
		unix.Unlinkat(d.fd, name, unix.AT_REMOVEDIR)
		return err
	}
	return nil
}

// Symlink creates the symlink name pointing to target. target is stored as
// given and never resolved.
func (d *Dir) Symlink(target, name string) error {
	rel, err := d.check("symlink", name)
	if err != nil {
		return err
	}
	if err := injected("symlink", rel); err != nil {
		return err
	}
	if err := ignoringEINTR(func() error { return unix.Symlinkat(target, d.fd, name) }); err != nil {
		return &fs.PathError{Op: "symlink", Path: rel, Err: err}
	}
	return nil
}

// Unlink removes the file or symlink name. It does not remove a directory.
func (d *Dir) Unlink(name string) error {
	rel, err := d.check("unlink", name)
	if err != nil {
		return err
	}
	if err := injected("unlink", rel); err != nil {
		return err
	}
	if err := ignoringEINTR(func() error { return unix.Unlinkat(d.fd, name, 0) }); err != nil {
		return &fs.PathError{Op: "unlink", Path: rel, Err: err}
	}
	return nil
}

// Rmdir removes the empty directory name.
func (d *Dir) Rmdir(name string) error {
	rel, err := d.check("rmdir", name)
	if err != nil {
		return err
	}
	if err := injected("rmdir", rel); err != nil {
		return err
	}
	if err := ignoringEINTR(func() error { return unix.Unlinkat(d.fd, name, unix.AT_REMOVEDIR) }); err != nil {
		return &fs.PathError{Op: "rmdir", Path: rel, Err: err}
	}
	return nil
}

// Chmod sets the permission bits of the regular file or directory name to
// perm (including fs.ModeSetuid, fs.ModeSetgid and fs.ModeSticky). A symlink
// is refused with an error wrapping [ErrSymlink] and its target is left
// alone; any other type is refused with [ErrNotRegular]. The entry is opened
// without following symlinks and its identity checked before the change.
func (d *Dir) Chmod(name string, perm fs.FileMode) error {
	rel, err := d.check("chmod", name)
	if err != nil {
		return err
	}
	st, err := lstatAt(d.fd, name)
	if err != nil {
		return &fs.PathError{Op: "chmod", Path: rel, Err: err}
	}
	m := fileMode(uint32(st.Mode))
	switch {
	case m&fs.ModeSymlink != 0:
		return &fs.PathError{Op: "chmod", Path: rel, Err: errSymlinkNotRegular}
	case !m.IsDir() && !m.IsRegular():
		return &fs.PathError{Op: "chmod", Path: rel, Err: ErrNotRegular}
	}
	return d.chmodKind(rel, name, perm, m.IsDir(), &st)
}

// chmodKind opens name, which must be a directory when dir is set and a
// regular file otherwise (and the inode of want, if not nil), and fchmods it
// to perm.
func (d *Dir) chmodKind(rel, name string, perm fs.FileMode, dir bool, want *unix.Stat_t) error {
	if err := injected("chmod", rel); err != nil {
		return err
	}
	flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY
	if dir {
		flags |= unix.O_DIRECTORY
	}
	fd, err := openAt(d.fd, name, flags, 0)
	if err == unix.EACCES {
		return chmodUnreadable(d.fd, rel, name, perm, dir, want)
	}
	if err != nil {
		if st, serr := lstatAt(d.fd, name); serr == nil && fileMode(uint32(st.Mode))&fs.ModeSymlink != 0 {
			err = errSymlinkNotRegular
		}
		return &fs.PathError{Op: "chmod", Path: rel, Err: err}
	}
	defer unix.Close(fd)
	if err := checkKind(fd, rel, dir, want); err != nil {
		return err
	}
	if err := ignoringEINTR(func() error { return unix.Fchmod(fd, unixPerm(perm)) }); err != nil {
		return &fs.PathError{Op: "chmod", Path: rel, Err: err}
	}
	return nil
}

// checkKind verifies that the object open at fd is a directory when dir is set
// and a regular file otherwise, and that it is the inode of want if not nil.
func checkKind(fd int, rel string, dir bool, want *unix.Stat_t) error {
	st, err := fstat(fd)
	if err != nil {
		return &fs.PathError{Op: "fstat", Path: rel, Err: err}
	}
	m := fileMode(uint32(st.Mode))
	if dir && !m.IsDir() || !dir && !m.IsRegular() ||
		want != nil && (st.Ino != want.Ino || st.Dev != want.Dev) {
		return &fs.PathError{Op: "chmod", Path: rel, Err: ErrChanged}
	}
	return nil
}

// Rename renames old in d to new in dst, which may be d, replacing new if it
// exists as rename(2) does.
func (d *Dir) Rename(old string, dst *Dir, new string) error {
	return d.rename("rename", old, dst, new, renameReplace)
}

// RenameNoReplace renames old in d to new in dst, failing with an error
// wrapping fs.ErrExist if new exists. On systems other than Linux and darwin
// the check and the rename are two steps, and another process can create new
// in between.
func (d *Dir) RenameNoReplace(old string, dst *Dir, new string) error {
	return d.rename("rename", old, dst, new, renameNoReplace)
}

// Exchange atomically swaps a in d and b in dst; both must exist. Where the
// system has no atomic exchange the error wraps errors.ErrUnsupported.
func (d *Dir) Exchange(a string, dst *Dir, b string) error {
	return d.rename("exchange", a, dst, b, renameExchange)
}

func (d *Dir) rename(op, old string, dst *Dir, new string, mode renameMode) error {
	if err := validName(old); err != nil {
		return &fs.PathError{Op: op, Path: d.rel, Err: err}
	}
	if err := validName(new); err != nil {
		return &fs.PathError{Op: op, Path: dst.rel, Err: err}
	}
	if err := injected(op, joinRel(d.rel, old)); err != nil {
		return err
	}
	if err := renameAt(d.fd, old, dst.fd, new, mode); err != nil {
		return &os.LinkError{Op: op, Old: joinRel(d.rel, old), New: joinRel(dst.rel, new), Err: err}
	}
	return nil
}

// renameMode selects the behaviour of renameAt when the target exists.
type renameMode int

const (
	renameReplace   renameMode = iota // replace the target
	renameNoReplace                   // fail with EEXIST
	renameExchange                    // swap the two entries
)

// Stat describes the directory itself (fstat of its handle). A directory
// removed since it was opened has no links left (Nlink 0).
func (d *Dir) Stat() (Stat, error) {
	st, err := fstat(d.fd)
	if err != nil {
		return Stat{}, &fs.PathError{Op: "fstat", Path: d.rel, Err: err}
	}
	return statOf(&st), nil
}

// Perm returns the directory's own permission bits, setuid, setgid and
// sticky included.
func (d *Dir) Perm() (fs.FileMode, error) {
	st, err := fstat(d.fd)
	if err != nil {
		return 0, &fs.PathError{Op: "fstat", Path: d.rel, Err: err}
	}
	return fileMode(uint32(st.Mode)) & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky), nil
}

// SetPerm sets the directory's own permission bits (fchmod of its handle).
func (d *Dir) SetPerm(perm fs.FileMode) error {
	if err := ignoringEINTR(func() error { return unix.Fchmod(d.fd, unixPerm(perm)) }); err != nil {
		return &fs.PathError{Op: "chmod", Path: d.rel, Err: err}
	}
	return nil
}

// Sync flushes the directory to stable storage.
func (d *Dir) Sync() error {
	if err := fsync(d.fd); err != nil {
		return &fs.PathError{Op: "fsync", Path: d.rel, Err: err}
	}
	return nil
}
