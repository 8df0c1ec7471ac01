//go:build unix

package fsx

import (
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// File is a regular file open by its descriptor alone. It is what the
// engine reads and writes many small files through: an *os.File asks the
// descriptor's flags when it is made and again when it is used, a File
// costs only the calls that move bytes. Reads and writes are positioned
// (pread, pwrite); a File has no offset. It is for one goroutine.
type File struct {
	fd   int
	name string
	st   Stat
}

// Open opens the regular file name for reading. It opens with O_NONBLOCK
// and O_NOFOLLOW, then refuses anything but a regular file on the
// directory's device with an error wrapping [ErrNotRegular] (a symlink: and
// [ErrSymlink]) or [ErrCrossDevice], so a FIFO never blocks the reader.
// O_NONBLOCK stays set: it has no effect on a regular file's reads.
func (d *Dir) Open(name string) (*File, error) {
	rel, err := d.check("open", name)
	if err != nil {
		return nil, err
	}
	fd, err := openAt(d.fd, name, unix.O_RDONLY|noFollow()|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		if err != unix.ENOENT {
			if st, serr := lstatAt(d.fd, name); serr == nil && fileMode(uint32(st.Mode))&fs.ModeSymlink != 0 {
				err = errSymlinkNotRegular
			}
		}
		return nil, &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	st, err := fstat(fd)
	switch {
	case err != nil:
		err = &fs.PathError{Op: "fstat", Path: rel, Err: err}
	case !fileMode(uint32(st.Mode)).IsRegular():
		err = &fs.PathError{Op: "open", Path: rel, Err: ErrNotRegular}
	case uint64(st.Dev) != d.dev && !follow:
		err = &fs.PathError{Op: "open", Path: rel, Err: ErrCrossDevice}
	}
	if err != nil {
		_ = unix.Close(fd) // the error above is what the caller needs
		return nil, err
	}
	return &File{fd: fd, name: rel, st: statOf(&st)}, nil
}

// OpenPath opens the regular file at path for reading, never following a
// symlink at its last component.
func OpenPath(path string) (*File, error) {
	fd, err := openAt(unix.AT_FDCWD, path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	st, err := fstat(fd)
	if err == nil && !fileMode(uint32(st.Mode)).IsRegular() {
		err = ErrNotRegular
	}
	if err != nil {
		_ = unix.Close(fd) // the error is what the caller needs
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return &File{fd: fd, name: path, st: statOf(&st)}, nil
}

// ReadSmallFile reads the regular file at path, never following a symlink
// at its last component. When the file is shorter than buf it is read whole
// with that one read (a short count is its end) and data holds it; else the
// file is returned open, with its fstat, for the caller to read as a
// stream (and close). Something that is not a regular file reads as an
// error or as what a read of it gives, which the caller checks (the blob
// store hashes every object it reads).
func ReadSmallFile(path string, buf []byte) (data []byte, large *File, err error) {
	return readSmallAt(unix.AT_FDCWD, path, path, buf)
}

// ReadSmallFile is the package's ReadSmallFile for the entry name of d,
// never following a symlink there: a symlink fails with an error wrapping
// [ErrSymlink] and [ErrNotRegular].
func (d *Dir) ReadSmallFile(name string, buf []byte) (data []byte, large *File, err error) {
	rel, err := d.check("open", name)
	if err != nil {
		return nil, nil, err
	}
	return readSmallAt(d.fd, name, rel, buf)
}

// readSmallAt is ReadSmallFile of name in dirfd; rel names it in errors.
func readSmallAt(dirfd int, name, rel string, buf []byte) (data []byte, large *File, err error) {
	fd, err := openAt(dirfd, name, unix.O_RDONLY|noFollow()|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		if err != unix.ENOENT {
			if st, serr := lstatAt(dirfd, name); serr == nil && fileMode(uint32(st.Mode))&fs.ModeSymlink != 0 {
				err = errSymlinkNotRegular
			}
		}
		return nil, nil, &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	f := &File{fd: fd, name: rel}
	n, err := f.ReadAt(buf, 0)
	if err == io.EOF {
		err = nil
	}
	if err != nil || n < len(buf) {
		if err != nil {
			// A directory reads as EISDIR: say what it is instead.
			if st, serr := fstat(fd); serr == nil && !fileMode(uint32(st.Mode)).IsRegular() {
				err = &fs.PathError{Op: "open", Path: rel, Err: ErrNotRegular}
			}
		}
		_ = f.Close() // read-only: nothing to lose
		return buf[:n], nil, err
	}
	st, err := fstat(fd)
	if err == nil && !fileMode(uint32(st.Mode)).IsRegular() {
		err = ErrNotRegular
	}
	if err != nil {
		_ = f.Close() // read-only: nothing to lose
		return nil, nil, &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	f.st = statOf(&st)
	return nil, f, nil
}

// CreateAt creates a new file named prefix followed by random characters
// in the directory at path, open for writing, with the permission bits perm
// (less the umask's; see [ExactPerm]), and returns it; its Name is the
// whole path.
func CreateAt(dir, prefix string, perm fs.FileMode) (*File, error) {
	for range 100 {
		name := filepath.Join(dir, prefix+strconv.FormatUint(rand.Uint64(), 36))
		fd, err := openAt(unix.AT_FDCWD, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, unixPerm(perm))
		if err == unix.EEXIST {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "create", Path: name, Err: err}
		}
		return &File{fd: fd, name: name}, nil
	}
	return nil, &fs.PathError{Op: "create", Path: filepath.Join(dir, prefix+"*"), Err: fs.ErrExist}
}

// CreateTempFile creates a new file named prefix followed by random
// characters in d, open for writing, with the permission bits perm less
// the umask's (see [ExactPerm]), and returns it with its name. prefix+"x"
// must be a valid name.
func (d *Dir) CreateTempFile(prefix string, perm fs.FileMode) (*File, string, error) {
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
		fd, err := openAt(d.fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, unixPerm(perm))
		if err == unix.EEXIST {
			continue
		}
		rel := joinRel(d.rel, name)
		if err != nil {
			return nil, "", &fs.PathError{Op: "create", Path: rel, Err: err}
		}
		return &File{fd: fd, name: rel}, name, nil
	}
	return nil, "", &fs.PathError{Op: "create", Path: joinRel(d.rel, prefix+"*"), Err: fs.ErrExist}
}

// ExactPerm reports whether a file created with the permission bits perm
// gets exactly those bits: the process declared its umask fixed
// ([FixUmask]), none of perm's bits is in it, and perm has no setuid,
// setgid or sticky bit (which a creation may drop). When it is false the
// creator sets the bits with [File.Chmod] after creating the file.
func ExactPerm(perm fs.FileMode) bool {
	m, ok := fixedUmask.Load(), umaskFixed.Load()
	return ok && perm&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) == 0 && uint32(perm.Perm())&m == 0
}

var (
	fixedUmask atomic.Uint32
	umaskFixed atomic.Bool
)

// FixUmask reads the process's umask and declares that the process never
// changes it: a file created afterwards with bits the umask leaves whole
// needs no fchmod (see ExactPerm). A program calls it at its start, before
// it makes any other goroutine; a library never does (its host may change
// the umask at any time, and then every created file has its bits set by
// fchmod).
func FixUmask() {
	m := unix.Umask(0o077)
	unix.Umask(m)
	fixedUmask.Store(uint32(m) & 0o777)
	umaskFixed.Store(true)
}

// Name returns the path the file was opened with (workspace-relative when
// opened through a [Dir]).
func (f *File) Name() string { return f.name }

// Fd returns the file's descriptor. It stays owned by f.
func (f *File) Fd() int { return f.fd }

// Stat returns what fstat said of the file when it was opened (zero for a
// file f created).
func (f *File) Stat() Stat { return f.st }

// Close closes the file. Closing it again is an error wrapping
// os.ErrClosed.
func (f *File) Close() error {
	if f.fd < 0 {
		return &fs.PathError{Op: "close", Path: f.name, Err: os.ErrClosed}
	}
	err := unix.Close(f.fd)
	f.fd = -1
	if err != nil {
		return &fs.PathError{Op: "close", Path: f.name, Err: err}
	}
	return nil
}

// Dup returns an *os.File on a duplicate of the file's descriptor, for the
// callers that need one (large copies, with their holes); closing it leaves
// f open. The two share one offset, which f never moves.
func (f *File) Dup() (*os.File, error) {
	fd, err := unix.FcntlInt(uintptr(f.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "dup", Path: f.name, Err: err}
	}
	return os.NewFile(uintptr(fd), f.name), nil
}

// ReadAt reads up to len(p) bytes at offset off with one pread (retried
// on EINTR). At the end of the file it returns 0, io.EOF.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		n, err := unix.Pread(f.fd, p, off)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, &fs.PathError{Op: "read", Path: f.name, Err: err}
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// WriteAt writes all of p at offset off.
func (f *File) WriteAt(p []byte, off int64) error {
	for len(p) > 0 {
		n, err := unix.Pwrite(f.fd, p, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "write", Path: f.name, Err: err}
		}
		p, off = p[n:], off+int64(n)
	}
	return nil
}

// Chmod sets the file's permission bits (fchmod).
func (f *File) Chmod(perm fs.FileMode) error {
	if err := ignoringEINTR(func() error { return unix.Fchmod(f.fd, unixPerm(perm)) }); err != nil {
		return &fs.PathError{Op: "chmod", Path: f.name, Err: err}
	}
	return nil
}

// Sync flushes the file's data and metadata to stable storage.
func (f *File) Sync() error {
	if err := fsync(f.fd); err != nil {
		return &fs.PathError{Op: "sync", Path: f.name, Err: err}
	}
	return nil
}

// smallFile is the size below which ReadSmall reads a file whole.
const smallFile = 64 << 10

// ReadSmall returns the whole content of a file shorter than 64 KiB with
// one read of one byte more than its size, which a short count shows to be
// the whole file (a regular file's read stops short only at its end). ok
// is false, and nothing is read, for a larger file. buf is used when it is
// large enough.
func (f *File) ReadSmall(buf []byte) (data []byte, ok bool, err error) {
	if f.st.Size >= smallFile {
		return nil, false, nil
	}
	want := int(f.st.Size) + 1
	if cap(buf) < want {
		buf = make([]byte, want)
	}
	buf = buf[:want]
	off := 0
	for {
		n, err := f.ReadAt(buf[off:], int64(off))
		if err == io.EOF {
			return buf[:off], true, nil
		}
		if err != nil {
			return nil, true, err
		}
		off += n
		if off < len(buf) {
			return buf[:off], true, nil // short: the end
		}
		// The file grew since it was opened: read on to its end.
		buf = append(buf, make([]byte, len(buf))...)
	}
}

// readBufs holds ReadTo's buffers.
var readBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// ReadTo writes the file's content, from its start to its end, to w and
// returns its length; buf is the read buffer (a pooled one of 256 KiB when
// nil). A file shorter than buf is read with one call.
func (f *File) ReadTo(w io.Writer, buf []byte) (int64, error) {
	if len(buf) == 0 {
		p := readBufs.Get().(*[]byte)
		defer readBufs.Put(p)
		buf = *p
	}
	var off int64
	for {
		n, err := f.ReadAt(buf, off)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return off, werr
			}
			off += int64(n)
		}
		if err == io.EOF {
			return off, nil
		}
		if err != nil {
			return off, err
		}
		if n < len(buf) {
			return off, nil // short: the end
		}
	}
}
