package wtx

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/tree"
)

// This file is the one place that reads what a workspace name holds now.
// Apply, undo, status, rebase, recovery and the stale-read check all go
// through it, so a symlink, a special file or a read error is judged the
// same way everywhere.

// presence says what stands at a workspace name.
type presence uint8

const (
	// atAbsent: nothing is at the name; its directory is there.
	atAbsent presence = iota + 1
	// atEntry: an entry is at the name (nameAt.Entry says which).
	atEntry
	// atNoParent: a directory above the name is gone.
	atNoParent
	// atParentNotDir: a directory above the name is now something else.
	atParentNotDir
	// atParentLink: a directory above the name is now a symbolic link,
	// which wtx never follows.
	atParentLink
	// atParentMount: a directory above the name is now a mount point.
	atParentMount
)

// nameAt is what a workspace name holds now.
type nameAt struct {
	Presence presence
	// Entry is set for atEntry: a file with its digest, a symlink with its
	// target, a directory or special file with its permission bits.
	Entry *tree.Entry
	// Stat is the object found (atEntry): its identity for a later
	// compare-and-swap.
	Stat fsx.Stat
}

// found reports whether an entry is at the name.
func (n nameAt) found() bool { return n.Presence == atEntry }

// holds reports whether the name holds e (nil: nothing), content and mode.
func (n nameAt) holds(e *tree.Entry) bool {
	if e == nil {
		return !n.found()
	}
	return n.found() && tree.SameContent(n.Entry, e)
}

// holdsFile reports whether the name holds a regular file with digest.
func (n nameAt) holdsFile(digest string) bool {
	return n.found() && n.Entry.Type == tree.File && n.Entry.Digest == digest
}

// String renders what is there for a conflict's Current field.
func (n nameAt) String() string {
	if n.found() {
		return sideDigest(n.Entry)
	}
	return sideDigest(nil)
}

// errBeingWritten is wrapped by a read whose length does not match the
// file's size: someone is writing it right now.
var errBeingWritten = errors.New("it is being written right now")

// contentReader says how a file's digest is found.
type contentReader struct {
	// known returns the digest a stat tuple proves (an unchanged file
	// status need not read); nil reads every file.
	known func(rel string, st fsx.Stat) (string, bool)
}

// entryAt reads what the workspace name rel holds now. A directory above it
// that is missing, not a directory, a symlink or a mount point is a
// presence, not an error; any other failure to look is an error, never a
// guess.
func entryAt(ctx context.Context, root *fsx.Root, rel string, cr contentReader) (nameAt, error) {
	d, err := root.OpenDir(tree.Parent(rel))
	if err != nil {
		return parentAbsent(err)
	}
	defer d.Close()
	return entryIn(ctx, d, rel, tree.Base(rel), cr)
}

// entryAtCached is entryAt with the directory above rel taken from dirs:
// for a pass over many names, each directory opened once.
func entryAtCached(ctx context.Context, dirs *fsx.DirCache, rel string, cr contentReader) (nameAt, error) {
	d, err := dirs.Open(tree.Parent(rel))
	if err != nil {
		return parentAbsent(err)
	}
	return entryIn(ctx, d, rel, tree.Base(rel), cr)
}

// parentAbsent is what a name holds whose directory could not be opened
// with err: a presence when the directory is missing, not a directory, a
// symlink or a mount point; else err.
func parentAbsent(err error) (nameAt, error) {
	switch {
	case errors.Is(err, fsx.ErrSymlink):
		return nameAt{Presence: atParentLink}, nil
	case errors.Is(err, fsx.ErrCrossDevice):
		return nameAt{Presence: atParentMount}, nil
	case errors.Is(err, fs.ErrNotExist):
		return nameAt{Presence: atNoParent}, nil
	case errors.Is(err, fsx.ErrNotDir), errors.Is(err, syscall.ENOTDIR):
		return nameAt{Presence: atParentNotDir}, nil
	}
	return nameAt{}, AsError(err)
}

// entryIn reads what name holds in the open directory d; rel is its
// workspace path (for messages and cr.known).
func entryIn(ctx context.Context, d *fsx.Dir, rel, name string, cr contentReader) (nameAt, error) {
	st, err := d.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nameAt{Presence: atAbsent}, nil
	}
	if err != nil {
		return nameAt{}, AsError(err)
	}
	e := &tree.Entry{Path: rel, Type: tree.TypeOf(st.Mode), Size: st.Size}
	switch e.Type {
	case tree.File:
		e.Perm = uint32(st.Mode.Perm())
		if cr.known != nil {
			if dg, ok := cr.known(rel, st); ok {
				e.Digest = dg
				break
			}
		}
		dg, err := readContent(ctx, d, rel, name, st, cr)
		if err != nil {
			return nameAt{}, err
		}
		e.Digest = dg
	case tree.Symlink:
		if e.Target, err = d.Readlink(name); err != nil {
			return nameAt{}, AsError(err)
		}
	default:
		e.Perm = uint32(st.Mode.Perm())
	}
	return nameAt{Presence: atEntry, Entry: e, Stat: st}, nil
}

// readContent hashes the file name and checks that what was
// read is as long as the file was when it was looked at.
func readContent(ctx context.Context, d *fsx.Dir, rel, name string, st fsx.Stat, cr contentReader) (string, error) {
	f, err := d.Open(name)
	if err != nil {
		return "", AsError(err)
	}
	defer f.Close()
	h := blob.NewHasher()
	n, err := f.ReadTo(h, nil)
	dg := h.Digest()
	if err != nil {
		return "", AsError(fmt.Errorf("read %s: %w", quote.Path(rel), err))
	}
	if n != st.Size {
		return "", &Error{Code: CodeUnstable, Err: errBeingWritten,
			Message: fmt.Sprintf("%s changed while it was read: %v", quote.Path(rel), errBeingWritten)}
	}
	return string(dg), nil
}
