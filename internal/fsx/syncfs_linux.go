package fsx

import (
	"io/fs"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/failpoint"
)

// SyncFS flushes every dirty page and inode of the filesystem that holds
// d to stable storage (syncfs(2)), and reports any writeback error on it
// since the last call (Linux 5.8 and later). One SyncFS replaces many
// fsyncs when a batch of files and directories must all be durable.
func (d *Dir) SyncFS() error {
	if failpoint.Disabled("fsync") {
		return nil
	}
	if err := injected("fsync", d.Rel()); err != nil {
		return err
	}
	if err := ignoringEINTR(func() error { return unix.Syncfs(d.fd) }); err != nil {
		return &fs.PathError{Op: "syncfs", Path: d.Rel(), Err: err}
	}
	return nil
}

// SyncFSPath is SyncFS for the filesystem holding the directory at path.
func SyncFSPath(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	if failpoint.Disabled("fsync") {
		return nil
	}
	if err := ignoringEINTR(func() error { return unix.Syncfs(fd) }); err != nil {
		return &fs.PathError{Op: "syncfs", Path: path, Err: err}
	}
	return nil
}
