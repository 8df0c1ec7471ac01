//go:build unix

package fsx

import (
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// WriteFileAtomic creates or replaces the file at path with data and
// permission bits perm. It writes a temporary file in the same directory,
// fsyncs and closes it, renames it over path and fsyncs the directory, so after
// a crash path holds either the old or the new content. It is meant for the
// wtx state directory, not for a workspace.
func WriteFileAtomic(path string, data []byte, perm fs.FileMode) error {
	return WriteAtomic(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteAtomic is WriteFileAtomic with the content written by write, straight
// into the temporary file: a large file need not be held in memory first.
// An error of write leaves path as it was.
func WriteAtomic(path string, perm fs.FileMode, write func(io.Writer) error) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if err := injected("create", path); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return &fs.PathError{Op: "write", Path: path, Err: err}
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := write(f); err != nil {
		return &fs.PathError{Op: "write", Path: path, Err: err}
	}
	if err := f.Chmod(perm); err != nil {
		return &fs.PathError{Op: "write", Path: path, Err: err}
	}
	if err := fsync(int(f.Fd())); err != nil {
		return &fs.PathError{Op: "fsync", Path: tmp, Err: err}
	}
	if err := f.Close(); err != nil {
		return &fs.PathError{Op: "write", Path: path, Err: err}
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		ok = true
		return err
	}
	ok = true
	return SyncDir(dir)
}

// SyncDir fsyncs the directory at path.
func SyncDir(path string) error {
	fd, err := openAt(unix.AT_FDCWD, path, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	if err := fsync(fd); err != nil {
		return &fs.PathError{Op: "fsync", Path: path, Err: err}
	}
	return nil
}

// SyncFile flushes f's data and metadata to stable storage (F_FULLFSYNC on
// darwin).
func SyncFile(f *os.File) error {
	if err := fsync(int(f.Fd())); err != nil {
		return &fs.PathError{Op: "fsync", Path: f.Name(), Err: err}
	}
	return nil
}

// CreateTemp creates a new file in dir, named prefix followed by random
// characters, with mode 0600 (less any umask bits), open for reading and
// writing, and returns it; its Name is the whole path. It is os.CreateTemp
// without the runtime poller's attempt to register a regular file, which
// costs four system calls per file.
func CreateTemp(dir, prefix string) (*os.File, error) {
	for range 100 {
		name := filepath.Join(dir, prefix+strconv.FormatUint(rand.Uint64(), 36))
		fd, err := openAt(unix.AT_FDCWD, name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, 0o600)
		if err == unix.EEXIST {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "create", Path: name, Err: err}
		}
		return os.NewFile(uintptr(fd), name), nil
	}
	return nil, &fs.PathError{Op: "create", Path: filepath.Join(dir, prefix+"*"), Err: fs.ErrExist}
}

// OpenRead opens the file at path for reading. It is os.Open without the
// runtime poller's attempt to register a regular file, which costs four
// system calls per file.
func OpenRead(path string) (*os.File, error) {
	fd, err := openAt(unix.AT_FDCWD, path, unix.O_RDONLY|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}
