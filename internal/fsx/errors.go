package fsx

import "errors"

// Sentinel errors. They are wrapped in an *fs.PathError that names the path.
var (
	// ErrSymlink reports that a component of a directory path is a symlink.
	ErrSymlink = errors.New("path goes through a symlink")
	// ErrCrossDevice reports that a path crosses a mount point.
	ErrCrossDevice = errors.New("path crosses a mount point")
	// ErrNotDir reports that a component of a directory path is not a directory.
	ErrNotDir = errors.New("not a directory")
	// ErrNotRegular reports that an entry which must be a regular file is a
	// FIFO, socket, device, directory or symlink.
	ErrNotRegular = errors.New("not a regular file")
	// ErrInvalidPath reports a rel path or name that fails [ValidRel] or the
	// single-component rule of [Dir] methods. It is returned before any system
	// call.
	ErrInvalidPath = errors.New("invalid path")
	// ErrChanged reports that an entry was replaced between the time it was
	// looked up and the time it was opened.
	ErrChanged = errors.New("entry changed while being opened")
)

// errSymlinkNotRegular is returned when OpenFile or Chmod meets a symlink at
// the final name. It matches both ErrSymlink and ErrNotRegular.
var errSymlinkNotRegular error = &multiError{
	msg:  "is a symlink",
	errs: []error{ErrSymlink, ErrNotRegular},
}

// multiError is an error with its own message that matches several sentinels.
type multiError struct {
	msg  string
	errs []error
}

func (e *multiError) Error() string   { return e.msg }
func (e *multiError) Unwrap() []error { return e.errs }
