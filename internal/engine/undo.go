package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/journal"
	"github.com/wtx-dev/wtx/internal/tree"
)

// This file is the undo half of recovery: a rollbacker puts one journal
// record back as the executor's step of the same kind left it, one
// function per step kind (see executor.step), wherever a crash stopped it.

// rollbacker undoes the records of one journal.
type rollbacker struct {
	root  *fsx.Root
	blobs *blob.Store
	temps *tempIndex
}

// undoing is one record being undone: its directory, the name in it, and
// what the name holds now.
type undoing struct {
	d    *fsx.Dir
	name string
	r    journal.Record
	at   NameAt
}

// cur is the entry at the name, or nil.
func (u *undoing) cur() *tree.Entry {
	if u.at.Found() {
		return u.at.Entry
	}
	return nil
}

// holds reports whether the name holds e (an entry, not nothing).
func (u *undoing) holds(e *tree.Entry) bool {
	return u.at.Found() && tree.SameContent(u.at.Entry, e)
}

// removeTemps unlinks the names in d that carry prefix (a record's Tmp).
func (rb *rollbacker) removeTemps(d *fsx.Dir, prefix string) error {
	names, err := rb.temps.of(d, prefix)
	if err != nil {
		return err
	}
	if err := removeNames(d, names); err != nil {
		return err
	}
	rb.temps.forget(d, prefix)
	return nil
}

// undo restores one record's pre-image if the path holds the post-image or
// an intermediate state the record explains; it returns a conflict if the
// path holds anything else, and an error if a step it needed failed (the
// path is then not restored). orig is the path's pre-image when an earlier
// record of the journal removes it (a type change): a path that still holds
// it was never reached by r.
func (rb *rollbacker) undo(r journal.Record, orig *tree.Entry) (*Conflict, error) {
	st := r.Step
	d, err := rb.root.OpenDir(tree.Parent(st.Path))
	if err != nil {
		return noDir(st, err)
	}
	defer d.Close()
	u := &undoing{d: d, name: tree.Base(st.Path), r: r}
	if u.at, err = entryIn(context.Background(), d, st.Path, u.name, ContentReader{}); err != nil {
		return nil, err
	}
	if orig != nil && u.holds(orig) {
		if st.Kind == tree.StepWrite || st.Kind == tree.StepSymlink {
			return nil, rb.removeTemps(d, r.Tmp)
		}
		return nil, nil
	}
	var cf *Conflict
	done := false
	switch st.Kind {
	case tree.StepChmod:
		done, err = undoChmod(u)
	case tree.StepDirPerm:
		done, err = undoDirPerm(u)
	case tree.StepMkdir:
		cf, done, err = undoMkdir(u)
	case tree.StepRmdir:
		cf, done, err = undoRmdir(u)
	case tree.StepRemove:
		cf, done, err = rb.undoRemove(u)
	case tree.StepWrite, tree.StepSymlink:
		cf, done, err = rb.undoWrite(u)
	}
	if done || cf != nil || err != nil {
		return cf, err
	}
	return changedSince(st, u.cur()), nil
}

// noDir is the undo of a step whose directory did not open (err): nothing
// of it remains when the step made what it wrote, or removed it, and its
// directory is gone; a directory that is not one is a conflict otherwise.
func noDir(st tree.Step, err error) (*Conflict, error) {
	made := st.Kind == tree.StepMkdir || st.Kind == tree.StepDirPerm || st.Old == nil
	if errors.Is(err, fs.ErrNotExist) && (made || st.New == nil) {
		return nil, nil // the directory it would live in is gone: nothing of it remains
	}
	notDir := errors.Is(err, fsx.ErrNotDir) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fsx.ErrSymlink)
	if made && notDir {
		return nil, nil // its directory is not (or no longer) one: nothing made here remains
	}
	if notDir || errors.Is(err, fs.ErrNotExist) {
		return &Conflict{Path: st.Path, Kind: KindTypeChanged, Detail: err.Error()}, nil
	}
	return nil, fmt.Errorf("open its directory: %w", err)
}

// changedSince is the conflict of a path that holds cur (nil: nothing),
// which the record does not explain.
func changedSince(st tree.Step, cur *tree.Entry) *Conflict {
	cf := &Conflict{Path: st.Path, Kind: KindModified, Base: sideDigest(st.Old), Current: "absent",
		Detail: "changed after the interrupted apply; left as it is"}
	if cur != nil {
		cf.Current = sideDigest(cur)
	}
	return cf
}

// undoChmod puts a file's old permission bits back (see executor.chmod).
func undoChmod(u *undoing) (bool, error) {
	st, cur := u.r.Step, u.cur()
	if cur != nil && cur.Type == tree.File && cur.Perm == st.New.Perm && cur.Digest == st.Old.Digest {
		if err := u.d.Chmod(u.name, fs.FileMode(st.Old.Perm)); err != nil {
			return true, fmt.Errorf("chmod back to %04o: %w", st.Old.Perm, err)
		}
		return true, nil
	}
	return u.holds(st.Old), nil
}

// undoDirPerm puts a directory's old permission bits back (see
// executor.dirPerm).
func undoDirPerm(u *undoing) (bool, error) {
	st, cur := u.r.Step, u.cur()
	if cur == nil {
		return true, nil // made by a step undone later (mkdir)
	}
	if cur.Type != tree.Dir {
		return false, nil
	}
	if cur.Perm != st.Old.Perm {
		if err := u.d.Chmod(u.name, fs.FileMode(st.Old.Perm)); err != nil {
			return true, fmt.Errorf("chmod back to %04o: %w", st.Old.Perm, err)
		}
	}
	return true, nil
}

// undoMkdir removes a directory the op made (see executor.mkdir), unless
// something was put in it since.
func undoMkdir(u *undoing) (*Conflict, bool, error) {
	cur := u.cur()
	if cur == nil {
		return nil, true, nil
	}
	if cur.Type != tree.Dir {
		return nil, false, nil
	}
	err := opening(u.d, func() error { return u.d.Rmdir(u.name) })
	switch {
	case err == nil || errors.Is(err, fs.ErrNotExist):
		return nil, true, nil
	case errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, fs.ErrExist):
		return &Conflict{Path: u.r.Step.Path, Kind: KindAddedInsideDeletedDir, Detail: "wtx created this directory and something else was put in it after the crash"}, true, nil
	}
	return nil, true, fmt.Errorf("remove the directory the apply made: %w", err)
}

// undoRmdir makes a directory the op removed again (see executor.rmdir).
func undoRmdir(u *undoing) (*Conflict, bool, error) {
	st, cur := u.r.Step, u.cur()
	if cur != nil {
		return nil, cur.Type == tree.Dir, nil
	}
	if err := opening(u.d, func() error { return u.d.Mkdir(u.name, fs.FileMode(st.Old.Perm)) }); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return &Conflict{Path: st.Path, Kind: KindCreated, Detail: err.Error()}, true, nil
		}
		return nil, true, fmt.Errorf("make the removed directory again: %w", err)
	}
	return nil, true, nil
}

// undoRemove puts back a file or symlink the op removed (see
// executor.remove): the pre-image moved aside, or one rebuilt from the blob
// store.
func (rb *rollbacker) undoRemove(u *undoing) (*Conflict, bool, error) {
	r, d := u.r, u.d
	if u.at.Found() {
		if u.holds(r.Step.Old) {
			return nil, true, rb.unlinkTemp(d, r.Tmp, r.Ident)
		}
		return nil, false, nil
	}
	// Moved aside and still there?
	tst, err := d.Lstat(r.Tmp)
	if err == nil && tst.Ino == r.Ident.Ino {
		if err := opening(d, func() error { return d.RenameNoReplace(r.Tmp, d, u.name) }); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return &Conflict{Path: r.Step.Path, Kind: KindCreated, Detail: err.Error()}, true, nil
			}
			return nil, true, fmt.Errorf("move the pre-image back: %w", err)
		}
		return nil, true, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, true, fmt.Errorf("look for the moved-aside pre-image: %w", err)
	}
	if err := rb.restore(d, u.name, r.Step.Old); err != nil {
		return nil, true, fmt.Errorf("restore the pre-image: %w", err)
	}
	return nil, true, nil
}

// undoWrite takes back a file or symlink the op wrote (see executor.write
// and executor.queue): what it added goes, what it replaced comes back
// from under its temporary name or from the blob store.
func (rb *rollbacker) undoWrite(u *undoing) (*Conflict, bool, error) {
	st, d := u.r.Step, u.d
	temps, err := rb.temps.of(d, u.r.Tmp)
	if err != nil {
		return nil, true, err
	}
	switch {
	case st.Old == nil && !u.at.Found():
		return nil, true, removeNames(d, temps)
	case st.Old == nil && u.holds(st.New):
		if err := removeOpening(d, u.name, d.Unlink); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, true, fmt.Errorf("remove what the apply added: %w", err)
		}
		return nil, true, removeNames(d, temps)
	case st.Old != nil && u.holds(st.Old):
		return nil, true, removeNames(d, temps) // the exchange never happened
	case st.Old != nil && u.holds(st.New):
		return nil, true, rb.exchangeBack(u, temps)
	case st.Old != nil && !u.at.Found():
		return rb.moveBack(u, temps)
	}
	return nil, false, nil
}

// exchangeBack puts the pre-image of a replaced path back: the one the
// exchange displaced, among temps, or one rebuilt from the blob store.
func (rb *rollbacker) exchangeBack(u *undoing, temps []string) error {
	d := u.d
	for _, t := range temps {
		tst, err := d.Lstat(t)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("look for the displaced pre-image: %w", err)
		}
		if err == nil && tst.Ino == u.r.Ident.Ino {
			if err := opening(d, func() error { return d.Exchange(t, d, u.name) }); err != nil {
				return fmt.Errorf("exchange the pre-image back: %w", err)
			}
			if err := removeOpening(d, t, d.Unlink); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove the post-image: %w", err)
			}
			return nil
		}
	}
	// The displaced pre-image is gone: rebuild it from the blob store.
	if err := removeOpening(d, u.name, d.Unlink); err != nil {
		return fmt.Errorf("remove the post-image: %w", err)
	}
	if err := rb.restore(d, u.name, u.r.Step.Old); err != nil {
		return fmt.Errorf("restore the pre-image: %w", err)
	}
	return nil
}

// moveBack puts the displaced pre-image of a path now empty back from
// temps; without one the path is not explained (done is false).
func (rb *rollbacker) moveBack(u *undoing, temps []string) (*Conflict, bool, error) {
	d := u.d
	for _, t := range temps {
		tst, err := d.Lstat(t)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, true, fmt.Errorf("look for the displaced pre-image: %w", err)
		}
		if err == nil && tst.Ino == u.r.Ident.Ino {
			if err := opening(d, func() error { return d.RenameNoReplace(t, d, u.name) }); err != nil {
				if errors.Is(err, fs.ErrExist) {
					return &Conflict{Path: u.r.Step.Path, Kind: KindCreated, Detail: err.Error()}, true, nil
				}
				return nil, true, fmt.Errorf("move the pre-image back: %w", err)
			}
			return nil, true, rb.removeTemps(d, u.r.Tmp)
		}
	}
	return nil, false, nil
}

func (rb *rollbacker) restore(d *fsx.Dir, name string, old *tree.Entry) error {
	// The directory may be one the op closed (its owner's write bit off):
	// it is opened for the while, as for the cleanup's removals.
	return opening(d, func() error { return restoreEntry(rb.blobs, d, name, old, rb.temps.restore) })
}

// unlinkTemp removes the moved-aside pre-image tmp if it is still the
// object the apply moved there.
func (rb *rollbacker) unlinkTemp(d *fsx.Dir, tmp string, ident tree.Stat) error {
	st, err := d.Lstat(tmp)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look for the moved-aside pre-image: %w", err)
	}
	if st.Ino != ident.Ino {
		return nil
	}
	if err := removeOpening(d, tmp, d.Unlink); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the moved-aside pre-image: %w", err)
	}
	return nil
}
