package engine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/wtx-dev/wtx/internal/quote"
)

// ConflictKind says how a path differs from what an op expected there.
type ConflictKind string

// The conflict kinds the engine produces. The strings are the "kind" field
// of a conflict in every answer: they never change.
const (
	// KindModified: the path holds other content than expected.
	KindModified ConflictKind = "modified"
	// KindCreated: something is at a path the op expected empty.
	KindCreated ConflictKind = "created"
	// KindDeleted: the path (or its directory) is gone.
	KindDeleted ConflictKind = "deleted"
	// KindTypeChanged: the path, or a directory above it, is of another
	// type now.
	KindTypeChanged ConflictKind = "type-changed"
	// KindAddedInsideDeletedDir: a directory the op removes holds
	// something the op does not remove.
	KindAddedInsideDeletedDir ConflictKind = "added-inside-deleted-dir"
	// KindSymlink: a directory above the path is now a symbolic link.
	KindSymlink ConflictKind = "symlink"
	// KindBoundary: a directory above the path is now a mount point.
	KindBoundary ConflictKind = "boundary"
	// KindSharedInode: a mode-only change of a file with other hard
	// links, which would change them too.
	KindSharedInode ConflictKind = "shared-inode"
)

// Conflict is one path whose content is not what an op expected.
type Conflict struct {
	Path string
	Kind ConflictKind
	// Base and Current render what was expected and what is there
	// (a digest, "symlink:<target>", "dir:<perm>" or "absent"); either may
	// be empty.
	Base, Current string
	Detail        string
}

// Error makes a *Conflict usable as an error inside the engine.
func (c *Conflict) Error() string { return c.Path + ": " + string(c.Kind) }

// ErrorKind is the class of an engine error: what the caller turns it into.
type ErrorKind uint8

// Error kinds. The numbers are not persisted.
const (
	// ErrCause: the error of a system call or of a callback, which the
	// caller classifies (Err).
	ErrCause ErrorKind = iota + 1
	// ErrChanged: paths changed outside the op while it ran (Conflicts);
	// nothing of the op is left in the workspace.
	ErrChanged
	// ErrUnstable: a file changed while it was read.
	ErrUnstable
	// ErrNotUndone: the op failed and could not be fully undone; its
	// journal stays for recovery.
	ErrNotUndone
	// ErrMarkerInDoubt: the commit marker could not be written, nor
	// removed: recovery tells whether the op landed (Err is the cause).
	ErrMarkerInDoubt
	// ErrLanded: the op landed, but a step after its commit marker (What)
	// failed with Err; the journal stays and recovery finishes it.
	ErrLanded
	// ErrJournal: the journal (What) could not be written or removed; Err
	// is the cause.
	ErrJournal
	// ErrInterrupted: recovery met a path changed since the interrupted
	// op (Conflicts), which it does not overwrite.
	ErrInterrupted
	// ErrStepsFailed: steps of a recovery failed (Errs); the journal stays.
	ErrStepsFailed
)

// Error is the error the engine returns. Msg is the message (or, when
// empty, Err's); the other fields are set as Kind says.
type Error struct {
	Kind      ErrorKind
	Msg       string
	Conflicts []Conflict
	Err       error
	// Errs are the failures of ErrStepsFailed, in order.
	Errs []error
	// OpKind and OpID name the op of ErrLanded; What names the failed
	// part of ErrLanded and ErrJournal.
	OpKind, OpID, What string
}

func (e *Error) Error() string {
	if e.Msg == "" && e.Err != nil {
		return e.Err.Error()
	}
	return e.Msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// cause returns err as an *Error: the one it holds, or a new ErrCause.
func cause(err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Kind: ErrCause, Err: err}
}

// changed is the ErrChanged of one conflict met by a step.
func changed(cf Conflict) *Error {
	return &Error{Kind: ErrChanged, Conflicts: []Conflict{cf},
		Msg: fmt.Sprintf("%s changed outside the stage while it was applied (%s)", quote.Path(cf.Path), cf.Kind)}
}

// notUndone is the ErrNotUndone of a failed step whose undo failed too.
func notUndone(msg string) *Error { return &Error{Kind: ErrNotUndone, Msg: msg} }

// stepsFailed reports every step of op's recovery that failed: the journal
// stays, and the next recovery tries them again.
func stepsFailed(op, verb string, errs []error) *Error {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return &Error{Kind: ErrStepsFailed, Err: errors.Join(errs...), Errs: errs, OpID: op,
		Msg: fmt.Sprintf("could not %s the interrupted apply %s: %d step(s) failed: %s; the journal stays and the workspace is not yet recovered", verb, op, len(errs), strings.Join(msgs, "; "))}
}
