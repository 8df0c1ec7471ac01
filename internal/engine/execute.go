package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/journal"
	"github.com/wtx-dev/wtx/internal/tree"
)

// This file is the swap half of the compare-and-swap: the executor runs a
// journaled plan on the workspace, one function per step kind, each
// returning how to undo it. Every step checks once more that the object it
// displaces is the one Check saw (ident).

// TestHookStep is set by a test to run before each plan step; an error
// makes that step fail.
var TestHookStep func(i int, st tree.Step) error

// tempPrefix starts the name of every temporary file wtx makes in a
// workspace directory while it applies.
const tempPrefix = journal.TempPrefix

// executor runs one op's plan.
type executor struct {
	root  *fsx.Root
	blobs *blob.Store
	// ident holds, per path, the object Check saw there.
	ident map[string]fsx.Stat
	// rmdirs holds the directories the plan removes: what is moved aside
	// inside them is unlinked at once (it would keep them from going).
	rmdirs map[string]bool
	// trash holds the pre-images moved aside, removed once the op commits.
	trash []*trashItem
	// pretemps maps a record's temporary prefix to the temporary file made
	// for it before the steps ran (see prepareTemps).
	pretemps map[string]string
	// pending are the new files of directories the plan made: they are
	// written under temporary names together, and land together after one
	// sync of their content (see land).
	pending []*pendingWrite
	// progress, if set, hears of each step before it runs (i of n).
	progress func(i, n int)
	// held returns the content of a small payload the apply read into
	// memory already (nil: none is).
	held func(blob.Digest) ([]byte, bool)
}

// pendingWrite is a new file of a directory the plan made, to be written
// under a temporary name (tmp, once written) with prefix and then landed
// (renamed to its name).
type pendingWrite struct {
	path, prefix string
	entry        *tree.Entry
	tmp          string
	landed       bool
}

type trashItem struct {
	dir, name string
	live      bool
}

// newExecutor returns an executor of root whose compare-and-swap checks
// against what cas saw.
func newExecutor(root *fsx.Root, blobs *blob.Store, ident map[string]fsx.Stat, progress func(i, n int)) *executor {
	return &executor{root: root, blobs: blobs, ident: ident, rmdirs: map[string]bool{}, progress: progress}
}

// records journals steps: each gets its temporary name (in its directory),
// the identity of the object it displaces, and whether a pre-image moved
// aside goes at once (its directory is removed later in the plan).
func (x *executor) records(opID string, steps []tree.Step) []journal.Record {
	for _, st := range steps {
		if st.Kind == tree.StepRmdir {
			x.rmdirs[st.Path] = true
		}
	}
	short := opID[len(opID)-8:]
	recs := make([]journal.Record, len(steps))
	for i, st := range steps {
		r := journal.Record{Step: st, Tmp: fmt.Sprintf("%s%s-%d-", tempPrefix, short, i)}
		if st.Kind == tree.StepRemove && x.rmdirs[tree.Parent(st.Path)] {
			r.Unlink = true
		}
		if id, ok := x.ident[st.Path]; ok && st.Old != nil {
			r.Ident = tree.Stat{Ino: id.Ino, Dev: id.Dev, Size: id.Size, Mtime: id.Mtime, Ctime: id.Ctime}
		}
		recs[i] = r
	}
	return recs
}

// execute runs the plan. On any failure it undoes what it did, newest
// first, and returns the error.
func (x *executor) execute(ctx context.Context, recs []journal.Record) (err error) {
	var undo []func() error
	touched := map[string]bool{}
	var inPlace []string // "dir\x00name" of the files a chmod changed
	defer func() {
		if err == nil {
			return
		}
		var uerrs []error
		for i := len(undo) - 1; i >= 0; i-- {
			if uerr := undo[i](); uerr != nil {
				uerrs = append(uerrs, uerr)
			}
		}
		if len(uerrs) > 0 {
			err = notUndone(fmt.Sprintf("apply failed (%v) and could not be fully undone: %v; the journal is kept for recovery", err, errors.Join(uerrs...)))
			return
		}
		var e *Error
		if errors.As(err, &e) && e.Kind == ErrChanged {
			e.Msg += "; nothing was written" // only now is it so
		}
	}()
	for i, r := range recs {
		st := r.Step
		if err := ctx.Err(); err != nil {
			return err
		}
		if TestHookStep != nil {
			if err := TestHookStep(i, st); err != nil {
				return cause(err)
			}
		}
		if st.Kind == tree.StepDirPerm {
			// The new files land before any directory is closed.
			if err := x.land(ctx); err != nil {
				return err
			}
		}
		hit("apply:step")
		if x.progress != nil {
			x.progress(i, len(recs))
		}
		u, err := x.step(r)
		hit("apply:step-done")
		if err != nil {
			return stepError(st, err)
		}
		if u != nil {
			undo = append(undo, u)
		}
		touched[tree.Parent(st.Path)] = true
		switch st.Kind {
		case tree.StepMkdir, tree.StepDirPerm:
			touched[st.Path] = true // its entries, or its mode
		case tree.StepChmod:
			inPlace = append(inPlace, tree.Parent(st.Path)+"\x00"+tree.Base(st.Path))
		}
	}
	if err := x.land(ctx); err != nil {
		return err
	}
	// Barrier: every touched directory, and every file whose mode changed
	// in place, is synced before success is told. A directory's fsync
	// carries its entries and its own mode, not its files' modes.
	dirs := make([]string, 0, len(touched))
	for d := range touched {
		if !x.rmdirs[d] {
			dirs = append(dirs, d)
		}
	}
	if err := syncAll(x.root, inPlace, dirs); err != nil {
		return cause(fmt.Errorf("sync the workspace: %w", err))
	}
	return nil
}

// landOne renames one pending new file to its name.
func (x *executor) landOne(pw *pendingWrite) error {
	d, err := x.root.OpenDir(tree.Parent(pw.path))
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.RenameNoReplace(pw.tmp, d, tree.Base(pw.path)); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return &Conflict{Path: pw.path, Kind: KindCreated}
		}
		return err
	}
	return nil
}

// stepError is the error of a failed step: a refusal when what it met was
// changed outside the stage.
func stepError(st tree.Step, err error) error {
	var cf *Conflict
	if errors.As(err, &cf) {
		return changed(*cf)
	}
	return cause(fmt.Errorf("apply %s %s: %w", st.Kind, st.Path, err))
}

// land writes the pending new files under their temporary names, in
// parallel (see writeTemps), and renames them to their names once one sync
// made all their content durable: as with the temporary files prepareTemps
// makes, a name never holds content that a power loss could undo. Each
// rename opens its directory afresh, beneath the root, as a step does: a
// directory moved out of the workspace meanwhile is not followed.
func (x *executor) land(ctx context.Context) error {
	if len(x.pending) == 0 {
		return nil
	}
	jobs := make([]tempJob, len(x.pending))
	for i, pw := range x.pending {
		jobs[i] = tempJob{path: pw.path, e: pw.entry, prefix: pw.prefix, done: func(tmp string) { pw.tmp = tmp }}
	}
	if path, err := x.writeTemps(ctx, jobs, "apply:temp-written"); err != nil {
		return stepError(tree.Step{Kind: tree.StepWrite, Path: path}, dirError(path, err))
	}
	temps := make([]string, len(x.pending))
	for i, pw := range x.pending {
		temps[i] = tree.Parent(pw.path) + "\x00" + pw.tmp
	}
	if err := syncFiles(x.root, temps); err != nil {
		return cause(fmt.Errorf("sync the new files: %w", err))
	}
	for _, pw := range x.pending {
		if err := x.landOne(pw); err != nil {
			return stepError(tree.Step{Kind: tree.StepWrite, Path: pw.path}, err)
		}
		pw.landed = true
		hit("apply:landed")
	}
	x.pending = nil
	return nil
}

// step opens the step's directory and runs the function of its kind; a new
// file of a directory the plan made waits for land instead.
func (x *executor) step(r journal.Record) (func() error, error) {
	if x.lands(r) {
		return x.queue(r), nil
	}
	d, err := x.root.OpenDir(tree.Parent(r.Step.Path))
	if err != nil {
		return nil, dirError(r.Step.Path, err)
	}
	defer d.Close()
	switch r.Step.Kind {
	case tree.StepRemove:
		return x.remove(d, r)
	case tree.StepRmdir:
		return x.rmdir(d, r)
	case tree.StepMkdir:
		return x.mkdir(d, r)
	case tree.StepWrite, tree.StepSymlink:
		return x.write(d, r)
	case tree.StepChmod:
		return x.chmod(d, r)
	case tree.StepDirPerm:
		return x.dirPerm(d, r)
	}
	return nil, fmt.Errorf("unknown step %v", r.Step.Kind)
}

// remove moves a file or symlink aside under the record's temporary name
// (removed once the op commits), or unlinks it at once when its directory
// goes too.
func (x *executor) remove(d *fsx.Dir, r journal.Record) (func() error, error) {
	st, name, tmp := r.Step, tree.Base(r.Step.Path), r.Tmp
	if err := x.untouched(d, st.Path, name); err != nil {
		return nil, err
	}
	if err := d.RenameNoReplace(name, d, tmp); err != nil {
		return nil, err
	}
	hit("apply:moved-aside")
	if err := x.same(d, st.Path, tmp); err != nil {
		if rerr := d.RenameNoReplace(tmp, d, name); rerr != nil {
			return nil, putBackError(st.Path, fmt.Errorf("changed while the apply ran"), rerr)
		}
		return nil, err
	}
	if r.Unlink {
		// Its directory goes too: the pre-image lives on in the blob
		// store (files) or in the plan (symlinks).
		if err := d.Unlink(tmp); err != nil {
			if rerr := d.RenameNoReplace(tmp, d, name); rerr != nil {
				return nil, putBackError(st.Path, err, rerr)
			}
			return nil, err
		}
		return x.undoIn(st.Path, func(d *fsx.Dir) error { return restoreEntry(x.blobs, d, name, st.Old, restorePrefixOf(r.Tmp)) }), nil
	}
	t := x.moveAside(st.Path, tmp)
	return x.undoIn(st.Path, func(d *fsx.Dir) error {
		t.live = false
		return d.RenameNoReplace(tmp, d, name)
	}), nil
}

// rmdir removes an empty directory.
func (x *executor) rmdir(d *fsx.Dir, r journal.Record) (func() error, error) {
	st, name := r.Step, tree.Base(r.Step.Path)
	if err := x.same(d, st.Path, name); err != nil {
		return nil, err
	}
	if err := d.Rmdir(name); err != nil {
		if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, fs.ErrExist) {
			return nil, &Conflict{Path: st.Path, Kind: KindAddedInsideDeletedDir}
		}
		return nil, err
	}
	perm := fs.FileMode(st.Old.Perm)
	return x.undoIn(st.Path, func(d *fsx.Dir) error { return d.Mkdir(name, perm) }), nil
}

// mkdir makes a directory, private until the plan's last steps set its
// permission bits.
func (x *executor) mkdir(d *fsx.Dir, r journal.Record) (func() error, error) {
	name := tree.Base(r.Step.Path)
	if err := d.Mkdir(name, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, &Conflict{Path: r.Step.Path, Kind: KindCreated}
		}
		return nil, err
	}
	return x.undoIn(r.Step.Path, func(d *fsx.Dir) error { return d.Rmdir(name) }), nil
}

// write puts a file or symlink in place: its new content is written under
// a temporary name first (or was, by prepareTemps), then renamed over an
// absent name or exchanged with the pre-image, which stays under the
// temporary name until the op commits.
func (x *executor) write(d *fsx.Dir, r journal.Record) (func() error, error) {
	st, name := r.Step, tree.Base(r.Step.Path)
	tmp, ok := x.pretemps[r.Tmp]
	if ok {
		delete(x.pretemps, r.Tmp)
	} else {
		var err error
		if tmp, err = x.writeTemp(d, st.New, r.Tmp, true); err != nil {
			return nil, err
		}
	}
	hit("apply:temp-written")
	if st.Old == nil {
		if err := d.RenameNoReplace(tmp, d, name); err != nil {
			_ = d.Unlink(tmp) // best effort: a leftover is the journal's to remove
			if errors.Is(err, fs.ErrExist) {
				return nil, &Conflict{Path: st.Path, Kind: KindCreated}
			}
			return nil, err
		}
		return x.undoIn(st.Path, func(d *fsx.Dir) error {
			if err := stillWritten(d, st.Path, name, st.New); err != nil {
				return err
			}
			return d.Unlink(name)
		}), nil
	}
	if err := x.untouched(d, st.Path, name); err != nil {
		_ = d.Unlink(tmp) // best effort: a leftover is the journal's to remove
		return nil, err
	}
	if err := d.Exchange(tmp, d, name); err != nil {
		_ = d.Unlink(tmp) // best effort: a leftover is the journal's to remove
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &Conflict{Path: st.Path, Kind: KindDeleted}
		}
		return nil, err
	}
	hit("apply:exchanged")
	if err := x.same(d, st.Path, tmp); err != nil {
		// Someone replaced the file between check and swap: put their
		// version back and give up.
		if rerr := d.Exchange(tmp, d, name); rerr != nil {
			return nil, putBackError(st.Path, fmt.Errorf("changed while the apply ran"), rerr)
		}
		_ = d.Unlink(tmp) // best effort: a leftover is the journal's to remove
		return nil, &Conflict{Path: st.Path, Kind: KindModified, Detail: "changed while the apply ran"}
	}
	t := x.moveAside(st.Path, tmp)
	return x.undoIn(st.Path, func(d *fsx.Dir) error {
		if err := stillWritten(d, st.Path, name, st.New); err != nil {
			return err
		}
		t.live = false
		if err := d.Exchange(tmp, d, name); err != nil {
			return err
		}
		return d.Unlink(tmp)
	}), nil
}

// dirError is the error of a step at path whose directory did not open
// (err): a conflict when a directory above it became a symlink.
func dirError(path string, err error) error {
	if errors.Is(err, fsx.ErrSymlink) {
		return &Conflict{Path: path, Kind: KindSymlink, Detail: "a directory above it became a symlink"}
	}
	return err
}

// lands reports whether r writes a new file that land writes and lands
// with the others: a new file in a directory the plan made (no temporary
// file was prepared for it), one sync for all where one fsync each would
// cost more than the rest of the apply. (WTX_DISABLE=land-together, the
// negative control of the cost test: each is written, synced and lands at
// once.)
func (x *executor) lands(r journal.Record) bool {
	if r.Step.Kind != tree.StepWrite || r.Step.Old != nil || failpoint.Disabled("land-together") {
		return false
	}
	_, prepared := x.pretemps[r.Tmp]
	return !prepared
}

// queue queues r's new file for land and returns the step's undo.
func (x *executor) queue(r journal.Record) func() error {
	st, name := r.Step, tree.Base(r.Step.Path)
	pw := &pendingWrite{path: st.Path, prefix: r.Tmp, entry: st.New}
	x.pending = append(x.pending, pw)
	return x.undoIn(st.Path, func(d *fsx.Dir) error {
		switch {
		case pw.landed:
			if err := stillWritten(d, st.Path, name, st.New); err != nil {
				return err
			}
			return d.Unlink(name)
		case pw.tmp != "":
			return d.Unlink(pw.tmp)
		}
		return nil // never written
	})
}

// ErrWrittenSince is the undo of a write step that finds its path no
// longer holding what the step wrote: someone wrote into it (or replaced
// it) after it landed, and putting the pre-image back would throw that
// away. The path is left as it is; the apply then fails as not fully
// undone, its journal stays, and recovery reports the path (it never
// overwrites a change made outside).
var ErrWrittenSince = errors.New("changed outside the stage after the apply wrote it; left as it is")

// stillWritten checks, before the undo of a write step, that name holds
// what the step wrote (e), content and mode; it reads the file (an undo
// runs only when an apply fails).
func stillWritten(d *fsx.Dir, rel, name string, e *tree.Entry) error {
	if failpoint.Disabled("still-written") {
		return nil // negative control: a rollback that overwrites later writes
	}
	at, err := entryIn(context.Background(), d, rel, name, ContentReader{})
	if err != nil {
		return err
	}
	if !at.Holds(e) {
		return ErrWrittenSince
	}
	return nil
}

// chmod changes a file's permission bits.
func (x *executor) chmod(d *fsx.Dir, r journal.Record) (func() error, error) {
	st, name := r.Step, tree.Base(r.Step.Path)
	if err := x.untouched(d, st.Path, name); err != nil {
		return nil, err
	}
	if err := d.Chmod(name, fs.FileMode(st.New.Perm)); err != nil {
		return nil, err
	}
	old := fs.FileMode(st.Old.Perm)
	return x.undoIn(st.Path, func(d *fsx.Dir) error { return d.Chmod(name, old) }), nil
}

// dirPerm sets a directory's final permission bits.
func (x *executor) dirPerm(d *fsx.Dir, r journal.Record) (func() error, error) {
	st, name := r.Step, tree.Base(r.Step.Path)
	cur, err := d.Lstat(name)
	if err != nil || !cur.Mode.IsDir() {
		return nil, &Conflict{Path: st.Path, Kind: KindTypeChanged}
	}
	if err := d.Chmod(name, fs.FileMode(st.New.Perm)); err != nil {
		return nil, err
	}
	old := cur.Mode.Perm()
	return x.undoIn(st.Path, func(d *fsx.Dir) error { return d.Chmod(name, old) }), nil
}

// same checks that name in d is the object Check saw at rel: the
// swap half of the compare-and-swap.
func (x *executor) same(d *fsx.Dir, rel, name string) error {
	return x.matches(d, rel, name, false)
}

// untouched is same for an object wtx has not renamed yet: a file or
// symlink with no other hard link must also have the change time the check
// saw, so that a write into it in place that restored its size and mtime
// is caught too. (A rename changes the change time, so does a step on
// another link of the same file, and a directory's changes with its
// entries: none of those is compared by this.)
func (x *executor) untouched(d *fsx.Dir, rel, name string) error {
	return x.matches(d, rel, name, true)
}

func (x *executor) matches(d *fsx.Dir, rel, name string, strict bool) error {
	st, err := d.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return &Conflict{Path: rel, Kind: KindDeleted}
	}
	if err != nil {
		return &Conflict{Path: rel, Kind: KindModified, Detail: err.Error()}
	}
	if failpoint.Disabled("cas") {
		return nil
	}
	want, ok := x.ident[rel]
	switch {
	case !ok, want.Ino != st.Ino, want.Mode.Type() != st.Mode.Type(),
		st.Mode.IsRegular() && (want.Size != st.Size || want.Mtime != st.Mtime):
		return &Conflict{Path: rel, Kind: KindModified}
	case strict && !st.Mode.IsDir() && want.Nlink == 1 && st.Nlink == 1 && want.Ctime != st.Ctime:
		return &Conflict{Path: rel, Kind: KindModified, Detail: "changed in place while the apply ran"}
	}
	return nil
}

// moveAside records a pre-image moved aside as tmp in rel's directory.
func (x *executor) moveAside(rel, tmp string) *trashItem {
	t := &trashItem{dir: tree.Parent(rel), name: tmp, live: true}
	x.trash = append(x.trash, t)
	return t
}

// putBackError reports a step that failed and could not put back what it
// had moved: it is an internal error, so the journal stays and recovery
// finishes the rollback.
func putBackError(rel string, err, rerr error) error {
	return notUndone(fmt.Sprintf("apply %s: %v, and it could not be put back: %v", rel, err, rerr))
}

// undoIn returns an undo action that runs fn on rel's parent directory,
// opened afresh when the undo runs (an earlier undo may have recreated it).
func (x *executor) undoIn(rel string, fn func(d *fsx.Dir) error) func() error {
	return func() error {
		d, err := x.root.OpenDir(tree.Parent(rel))
		if err != nil {
			return fmt.Errorf("undo %s: %w", rel, err)
		}
		defer d.Close()
		if err := fn(d); err != nil {
			return fmt.Errorf("undo %s: %w", rel, err)
		}
		return nil
	}
}
