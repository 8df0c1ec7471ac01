//go:build unix && !linux

package fsx

import (
	"errors"
	"io/fs"
)

// SyncFS is not available here: callers fsync each file and directory.
func (d *Dir) SyncFS() error {
	return &fs.PathError{Op: "syncfs", Path: d.Rel(), Err: errors.ErrUnsupported}
}

// SyncFSPath is not available here: callers fsync each file and directory.
func SyncFSPath(path string) error {
	return &fs.PathError{Op: "syncfs", Path: path, Err: errors.ErrUnsupported}
}

// BulkSync is false here: there is no syncfs, each file is synced.
func BulkSync(n int) bool { return false }
