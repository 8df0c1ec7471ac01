//go:build unix

package fsx

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// The methods of this file take a rel path beneath the root. Each resolves
// the directories of rel as [Root.OpenDir] does and acts on its last
// component with one *at call that never follows a symlink there. They are
// what wtx's own directories (the state root) are reached through: a link
// found where wtx keeps its own file or directory is an error wrapping
// [ErrSymlink], never followed and never replaced.

// parent opens the directory holding rel and returns it with rel's last
// component. rel must be valid and not ".".
func (r *Root) parent(op, rel string) (*Dir, string, error) {
	if err := ValidRel(rel); err != nil {
		return nil, "", &fs.PathError{Op: op, Path: rel, Err: err}
	}
	if rel == "." {
		return nil, "", &fs.PathError{Op: op, Path: rel, Err: fmt.Errorf("%w: the root itself", ErrInvalidPath)}
	}
	d, err := r.OpenDir(path.Dir(rel))
	if err != nil {
		return nil, "", err
	}
	return d, path.Base(rel), nil
}

// OpenFile opens the regular file rel with flag (os.O_RDONLY, os.O_RDWR,
// os.O_CREATE, os.O_EXCL, os.O_TRUNC, os.O_APPEND), creating it with the
// permission bits perm less the umask's when flag asks. The file is opened
// with O_NOFOLLOW and O_NONBLOCK and refused unless it is a regular file on
// the root's device: a symlink at rel fails with an error wrapping both
// [ErrSymlink] and [ErrNotRegular], a FIFO or device with [ErrNotRegular]
// (a FIFO never blocks the opener), a file bind-mounted from another device
// with [ErrCrossDevice]. O_TRUNC takes effect only once the file passed
// those checks. The returned file is in blocking mode.
func (r *Root) OpenFile(rel string, flag int, perm fs.FileMode) (*os.File, error) {
	d, name, err := r.parent("open", rel)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.OpenFileFlags(name, flag, perm)
}

// OpenFileFlags is [Root.OpenFile] for the entry name of d.
func (d *Dir) OpenFileFlags(name string, flag int, perm fs.FileMode) (*os.File, error) {
	rel, err := d.check("open", name)
	if err != nil {
		return nil, err
	}
	if flag&os.O_CREATE != 0 {
		if err := injected("create", rel); err != nil {
			return nil, err
		}
	}
	trunc := flag&os.O_TRUNC != 0
	flag &^= os.O_TRUNC | unix.O_DIRECTORY
	fd, err := openAt(d.fd, name, flag|noFollow()|unix.O_NONBLOCK|unix.O_NOCTTY, unixPerm(perm))
	if err != nil {
		if err != unix.ENOENT && err != unix.EEXIST {
			if st, serr := lstatAt(d.fd, name); serr == nil && fileMode(uint32(st.Mode))&fs.ModeSymlink != 0 {
				err = errSymlinkNotRegular
			}
		}
		return nil, &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	if err := checkRegular(fd, rel, d.dev); err != nil {
		_ = unix.Close(fd) // the check's error is what the caller needs
		return nil, err
	}
	if trunc {
		err = ignoringEINTR(func() error { return unix.Ftruncate(fd, 0) })
	}
	if err == nil {
		// Back to blocking mode, keeping O_APPEND if asked for.
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, flag&unix.O_APPEND)
	}
	if err != nil {
		_ = unix.Close(fd) // the error is what the caller needs
		return nil, &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// checkRegular refuses what is open at fd unless it is a regular file on
// device dev.
func checkRegular(fd int, rel string, dev uint64) error {
	st, err := fstat(fd)
	switch {
	case err != nil:
		return &fs.PathError{Op: "fstat", Path: rel, Err: err}
	case !fileMode(uint32(st.Mode)).IsRegular():
		return &fs.PathError{Op: "open", Path: rel, Err: ErrNotRegular}
	case uint64(st.Dev) != dev && !follow:
		return &fs.PathError{Op: "open", Path: rel, Err: ErrCrossDevice}
	}
	return nil
}

// ReadFile returns the content of the regular file rel, opened as by
// [Root.OpenFile] for reading.
func (r *Root) ReadFile(rel string) ([]byte, error) {
	d, name, err := r.parent("read", rel)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	f, err := d.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, 0, f.st.Size+1)
	n, err := f.ReadTo(bufWriter{&buf}, nil)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// bufWriter appends what is written to a slice.
type bufWriter struct{ b *[]byte }

func (w bufWriter) Write(p []byte) (int, error) {
	*w.b = append(*w.b, p...)
	return len(p), nil
}

// ReadDir returns the names in directory rel, sorted bytewise, without "."
// and "..".
func (r *Root) ReadDir(rel string) ([]string, error) {
	d, err := r.OpenDir(rel)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.ReadDir()
}

// WriteFileAtomic is [Root.WriteAtomic] writing data.
func (r *Root) WriteFileAtomic(rel string, data []byte, perm fs.FileMode) error {
	return r.WriteAtomic(rel, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteAtomic creates or replaces the file rel with what write writes and
// the permission bits perm: a temporary file in rel's directory is
// written, set to perm, synced, renamed over rel and the directory synced,
// so that after a crash rel holds either the old or the new content. An
// error of write leaves rel as it was. Only a regular file is replaced: a
// symlink at rel fails with an error wrapping [ErrSymlink], anything else
// with [ErrNotRegular], and is left as it is.
func (r *Root) WriteAtomic(rel string, perm fs.FileMode, write func(io.Writer) error) error {
	d, name, err := r.parent("write", rel)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.WriteAtomic(name, perm, write)
}

// WriteAtomic is [Root.WriteAtomic] for the entry name of d.
func (d *Dir) WriteAtomic(name string, perm fs.FileMode, write func(io.Writer) error) error {
	rel, err := d.check("write", name)
	if err != nil {
		return err
	}
	switch st, err := d.Lstat(name); {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	case err == nil && st.IsSymlink() && !follow:
		return &fs.PathError{Op: "write", Path: rel, Err: errSymlinkNotRegular}
	case err == nil && !st.IsRegular() && !st.IsSymlink():
		return &fs.PathError{Op: "write", Path: rel, Err: ErrNotRegular}
	}
	prefix := "." + name + ".tmp-"
	if len(prefix) > MaxNameLen-16 {
		prefix = ".tmp-"
	}
	f, tmp, err := d.CreateTemp(prefix)
	if err != nil {
		return err
	}
	err = write(f)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = SyncFile(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.Rename(tmp, d, name)
	}
	if err != nil {
		_ = d.Unlink(tmp) // the write's error is what the caller needs
		return &fs.PathError{Op: "write", Path: rel, Err: err}
	}
	return d.Sync()
}

// Rename renames oldRel to newRel, both beneath the root, replacing newRel
// as rename(2) does. Neither is followed if it is a symlink: the link
// itself moves or is replaced.
func (r *Root) Rename(oldRel, newRel string) error {
	od, oname, err := r.parent("rename", oldRel)
	if err != nil {
		return err
	}
	defer od.Close()
	nd, nname, err := r.parent("rename", newRel)
	if err != nil {
		return err
	}
	defer nd.Close()
	return od.Rename(oname, nd, nname)
}

// Remove removes the file, symlink or empty directory rel.
func (r *Root) Remove(rel string) error {
	d, name, err := r.parent("remove", rel)
	if err != nil {
		return err
	}
	defer d.Close()
	err = d.Unlink(name)
	if isDirErr(err) {
		err = d.Rmdir(name)
	}
	return err
}

// isDirErr reports whether an unlink failed because the entry is a
// directory: EISDIR on Linux, EPERM where POSIX leaves it open.
func isDirErr(err error) bool {
	return errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EPERM)
}

// MkdirAll creates directory rel and any missing directory above it, each
// with exactly the permission bits perm, and returns rel open. Every
// directory it creates is made durable: the directory it is created in is
// synced. An existing component that is a symlink fails with an error
// wrapping [ErrSymlink], one that is not a directory with [ErrNotDir], a
// mount point with [ErrCrossDevice]; existing directories keep their
// modes.
func (r *Root) MkdirAll(rel string, perm fs.FileMode) (*Dir, error) {
	if err := ValidRel(rel); err != nil {
		return nil, &fs.PathError{Op: "mkdir", Path: rel, Err: err}
	}
	if d, err := r.OpenDir(rel); !errors.Is(err, fs.ErrNotExist) {
		return d, err
	}
	cur, err := r.OpenDir(".")
	if err != nil {
		return nil, err
	}
	for comp := range strings.SplitSeq(rel, "/") {
		next, err := cur.mkdirOpen(comp, perm)
		_ = cur.Close() // opened read-only: nothing to lose
		if err != nil {
			return nil, err
		}
		cur = next
	}
	return cur, nil
}

// mkdirOpen opens the directory name in d, creating it with perm (and
// syncing d) if it is missing.
func (d *Dir) mkdirOpen(name string, perm fs.FileMode) (*Dir, error) {
	next, err := d.OpenDir(name)
	if !errors.Is(err, fs.ErrNotExist) {
		return next, err
	}
	if err := d.Mkdir(name, perm); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	if err := d.Sync(); err != nil {
		return nil, err
	}
	return d.OpenDir(name)
}

// RemoveAll removes rel and everything beneath it, like os.RemoveAll, but
// never follows a symlink (a link is removed, its target left alone) and
// never crosses a mount point: a directory on another mount is left in
// place, with what leads to it, and the error wraps [ErrCrossDevice]. A
// directory whose mode keeps its owner from removing its entries is made
// 0700 first. A missing rel is not an error.
func (r *Root) RemoveAll(rel string) error {
	d, name, err := r.parent("remove", rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	return d.RemoveAll(name)
}

// RemoveAll is [Root.RemoveAll] for the entry name of d.
func (d *Dir) RemoveAll(name string) error {
	return d.removeAll(name, false)
}

// removeAll removes name from d; inside is set when d is itself being
// removed, and may then be opened up (0700) for its owner.
func (d *Dir) removeAll(name string, inside bool) error {
	err := d.Unlink(name)
	if inside && errors.Is(err, unix.EACCES) && d.SetPerm(0o700) == nil {
		err = d.Unlink(name)
	}
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if !isDirErr(err) {
		return err
	}
	sub, oerr := d.OpenDir(name)
	if errors.Is(oerr, unix.EACCES) && d.Chmod(name, 0o700) == nil {
		// A directory its owner cannot read: opened up first.
		sub, oerr = d.OpenDir(name)
	}
	switch {
	case errors.Is(oerr, fs.ErrNotExist):
		return nil
	case errors.Is(oerr, ErrNotDir):
		return err // not a directory: the unlink's own refusal stands
	case oerr != nil:
		return oerr
	}
	err = sub.removeEntries()
	_ = sub.Close() // opened read-only: nothing to lose
	if err != nil {
		return err
	}
	if err := d.Rmdir(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// removeEntries removes everything in d, reading it again until it is
// empty (a listing may not see what is created meanwhile).
func (d *Dir) removeEntries() error {
	for range 8 {
		names, err := d.ReadDir()
		if err != nil {
			return err
		}
		if len(names) == 0 {
			return nil
		}
		var errs []error
		for _, n := range names {
			if err := d.removeAll(n, true); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
	}
	return &fs.PathError{Op: "remove", Path: d.rel, Err: unix.ENOTEMPTY}
}

// Chmod sets the permission bits of the regular file or directory rel, as
// [Dir.Chmod] does (a symlink is refused, its target left alone); "." is
// the root itself.
func (r *Root) Chmod(rel string, perm fs.FileMode) error {
	if rel == "." {
		d, err := r.OpenDir(".")
		if err != nil {
			return err
		}
		defer d.Close()
		return d.SetPerm(perm)
	}
	d, name, err := r.parent("chmod", rel)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Chmod(name, perm)
}
