package engine

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

// Presence says what stands at a workspace name.
type Presence uint8

const (
	// Absent: nothing is at the name; its directory is there.
	Absent Presence = iota + 1
	// Present: an entry is at the name (NameAt.Entry says which).
	Present
	// NoParent: a directory above the name is gone.
	NoParent
	// ParentNotDir: a directory above the name is now something else.
	ParentNotDir
	// ParentLink: a directory above the name is now a symbolic link,
	// which wtx never follows.
	ParentLink
	// ParentMount: a directory above the name is now a mount point.
	ParentMount
)

// NameAt is what a workspace name holds now.
type NameAt struct {
	Presence Presence
	// Entry is set for Present: a file with its digest, a symlink with its
	// target, a directory or special file with its permission bits.
	Entry *tree.Entry
	// Stat is the object found (Present): its identity for a later
	// compare-and-swap.
	Stat fsx.Stat
}

// Found reports whether an entry is at the name.
func (n NameAt) Found() bool { return n.Presence == Present }

// Holds reports whether the name holds e (nil: nothing), content and mode.
func (n NameAt) Holds(e *tree.Entry) bool {
	if e == nil {
		return !n.Found()
	}
	return n.Found() && tree.SameContent(n.Entry, e)
}

// HoldsFile reports whether the name holds a regular file with digest.
func (n NameAt) HoldsFile(digest string) bool {
	return n.Found() && n.Entry.Type == tree.File && n.Entry.Digest == digest
}

// String renders what is there for a conflict's Current field.
func (n NameAt) String() string {
	if n.Found() {
		return sideDigest(n.Entry)
	}
	return sideDigest(nil)
}

// errBeingWritten is wrapped by a read whose length does not match the
// file's size: someone is writing it right now.
var errBeingWritten = errors.New("it is being written right now")

// ContentReader says how a file's digest is found.
type ContentReader struct {
	// Known returns the digest a stat tuple proves (an unchanged file
	// status need not read); nil reads every file.
	Known func(rel string, st fsx.Stat) (string, bool)
}

// EntryAt reads what the workspace name rel holds now. A directory above it
// that is missing, not a directory, a symlink or a mount point is a
// Presence, not an error; any other failure to look is an error, never a
// guess.
func EntryAt(ctx context.Context, root *fsx.Root, rel string, cr ContentReader) (NameAt, error) {
	d, err := root.OpenDir(tree.Parent(rel))
	if err != nil {
		return parentAbsent(err)
	}
	defer d.Close()
	return entryIn(ctx, d, rel, tree.Base(rel), cr)
}

// entryAtCached is EntryAt with the directory above rel taken from dirs:
// for a pass over many names, each directory opened once.
func entryAtCached(ctx context.Context, dirs *fsx.DirCache, rel string, cr ContentReader) (NameAt, error) {
	d, err := dirs.Open(tree.Parent(rel))
	if err != nil {
		return parentAbsent(err)
	}
	return entryIn(ctx, d, rel, tree.Base(rel), cr)
}

// parentAbsent is what a name holds whose directory could not be opened
// with err: a Presence when the directory is missing, not a directory, a
// symlink or a mount point; else err.
func parentAbsent(err error) (NameAt, error) {
	switch {
	case errors.Is(err, fsx.ErrSymlink):
		return NameAt{Presence: ParentLink}, nil
	case errors.Is(err, fsx.ErrCrossDevice):
		return NameAt{Presence: ParentMount}, nil
	case errors.Is(err, fs.ErrNotExist):
		return NameAt{Presence: NoParent}, nil
	case errors.Is(err, fsx.ErrNotDir), errors.Is(err, syscall.ENOTDIR):
		return NameAt{Presence: ParentNotDir}, nil
	}
	return NameAt{}, cause(err)
}

// entryIn reads what name holds in the open directory d; rel is its
// workspace path (for messages and cr.Known).
func entryIn(ctx context.Context, d *fsx.Dir, rel, name string, cr ContentReader) (NameAt, error) {
	st, err := d.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return NameAt{Presence: Absent}, nil
	}
	if err != nil {
		return NameAt{}, cause(err)
	}
	e := &tree.Entry{Path: rel, Type: tree.TypeOf(st.Mode), Size: st.Size}
	switch e.Type {
	case tree.File:
		e.Perm = uint32(st.Mode.Perm())
		if cr.Known != nil {
			if dg, ok := cr.Known(rel, st); ok {
				e.Digest = dg
				break
			}
		}
		dg, err := readContent(ctx, d, rel, name, st, cr)
		if err != nil {
			return NameAt{}, err
		}
		e.Digest = dg
	case tree.Symlink:
		if e.Target, err = d.Readlink(name); err != nil {
			return NameAt{}, cause(err)
		}
	default:
		e.Perm = uint32(st.Mode.Perm())
	}
	return NameAt{Presence: Present, Entry: e, Stat: st}, nil
}

// readContent hashes the file name and checks that what was
// read is as long as the file was when it was looked at.
func readContent(ctx context.Context, d *fsx.Dir, rel, name string, st fsx.Stat, cr ContentReader) (string, error) {
	f, err := d.Open(name)
	if err != nil {
		return "", cause(err)
	}
	defer f.Close()
	h := blob.NewHasher()
	n, err := f.ReadTo(h, nil)
	dg := h.Digest()
	if err != nil {
		return "", cause(fmt.Errorf("read %s: %w", quote.Path(rel), err))
	}
	if n != st.Size {
		return "", &Error{Kind: ErrUnstable, Err: errBeingWritten,
			Msg: fmt.Sprintf("%s changed while it was read: %v", quote.Path(rel), errBeingWritten)}
	}
	return string(dg), nil
}
