package wtx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"syscall"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/journal"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/tree"
)

// RecoverResult reports what recovery did.
type RecoverResult struct {
	// RolledBack and RolledForward list the ops finished each way.
	RolledBack    []string `json:"rolled_back"`
	RolledForward []string `json:"rolled_forward"`
	// Discarded lists journals that were never complete (nothing of them
	// reached the workspace).
	Discarded []string `json:"discarded"`
	// Kept lists paths left as someone changed them after the crash, when a
	// rollback was forced with keep-external.
	Kept []Conflict `json:"kept"`
}

// Recover finishes or rolls back applies that a crash interrupted. Every
// Open runs it; it is idempotent and runs under the workspace lock. Without
// a commit marker an op is rolled back, with one it is rolled forward. A path
// that someone changed after the crash is never overwritten: recovery stops
// with refusal.interrupted-apply naming it, unless keepExternal is set, in
// which case the external version is kept, reported, and recovery finishes
// (the op's pre-images stay in the blob store).
func (w *Workspace) Recover(ctx context.Context, keepExternal bool) (*RecoverResult, error) {
	unlock, err := w.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return w.recoverLocked(ctx, keepExternal)
}

// pendingRecovery reports whether an interrupted op waits for recovery.
func (w *Workspace) pendingRecovery() bool {
	ops, err := journal.Pending(w.journalDir())
	return err == nil && len(ops) > 0
}

func (w *Workspace) recoverLocked(ctx context.Context, keepExternal bool) (*RecoverResult, error) {
	res := &RecoverResult{RolledBack: []string{}, RolledForward: []string{}, Discarded: []string{}, Kept: []Conflict{}}
	ops, err := journal.Pending(w.journalDir())
	if err != nil {
		return nil, AsError(err)
	}
	for _, op := range ops {
		j, committed, err := journal.Load(w.journalDir(), op)
		if err != nil {
			if errors.Is(err, journal.ErrCorrupt) || errors.Is(err, fs.ErrNotExist) {
				// Never durably written: the workspace was not touched.
				if err := journal.Remove(w.journalDir(), op); err != nil {
					return nil, AsError(err)
				}
				res.Discarded = append(res.Discarded, op)
				continue
			}
			return nil, AsError(err)
		}
		if j.Workspace != w.path {
			return nil, &Error{Code: CodeInterruptedApply,
				Message: fmt.Sprintf("journal %s belongs to workspace %s, not %s: wtx does not act on it here; move it out of %s", op, j.Workspace, w.path, w.journalDir())}
		}
		if committed {
			if err := w.rollForward(ctx, j); err != nil {
				return nil, err
			}
			res.RolledForward = append(res.RolledForward, op)
			continue
		}
		kept, err := w.rollbackJournal(ctx, j, keepExternal)
		if err != nil {
			return nil, err
		}
		res.Kept = append(res.Kept, kept...)
		if err := journal.Remove(w.journalDir(), op); err != nil {
			return nil, AsError(err)
		}
		res.RolledBack = append(res.RolledBack, op)
	}
	return res, nil
}

// rollForward finishes a committed op: what is left is cleanup and
// bookkeeping.
func (w *Workspace) rollForward(ctx context.Context, j *journal.Journal) error {
	root, err := fsx.OpenRoot(w.path)
	if err != nil {
		return AsError(err)
	}
	defer root.Close()
	for _, r := range j.Records {
		if (r.Step.Kind == tree.StepRemove && !r.Unlink) || r.Step.Kind == tree.StepWrite || r.Step.Kind == tree.StepSymlink {
			if err := removeTemps(root, r); err != nil {
				// The journal stays: the next recovery removes them.
				return AsError(fmt.Errorf("roll forward %s: %w", j.OpID, err))
			}
		}
		failpoint.Hit("recover:forward-cleanup")
	}
	var rec opRecord
	if err := json.Unmarshal(j.Body, &rec); err != nil {
		return &Error{Code: CodeInternal, Message: fmt.Sprintf("journal of %s: damaged op record: %v", j.OpID, err)}
	}
	if err := w.recordOp(ctx, rec); err != nil {
		return err
	}
	failpoint.Hit("recover:forward-recorded")
	if err := journal.Remove(w.journalDir(), j.OpID); err != nil {
		return AsError(err)
	}
	return nil
}

// rollback undoes an uncommitted op (used when the commit marker cannot be
// written).
func (w *Workspace) rollback(ctx context.Context, j *journal.Journal) error {
	_, err := w.rollbackJournal(ctx, j, false)
	return err
}

// rollbackJournal puts every path of j back to its pre-image, newest step
// first. Each record is judged by what the workspace holds now, so a crash at
// any point (of the apply or of an earlier recovery) is handled the same way.
func (w *Workspace) rollbackJournal(ctx context.Context, j *journal.Journal, keepExternal bool) ([]Conflict, error) {
	root, err := fsx.OpenRoot(w.path)
	if err != nil {
		return nil, AsError(err)
	}
	defer root.Close()
	rb := &rollbacker{w: w, root: root}
	// A path whose type changes is removed by one record and built again
	// by later ones; until the removal runs it still holds its pre-image.
	removed := map[string]int{}
	for i, r := range j.Records {
		if _, ok := removed[r.Step.Path]; !ok && (r.Step.Kind == tree.StepRemove || r.Step.Kind == tree.StepRmdir) {
			removed[r.Step.Path] = i
		}
	}
	var conflicts []Conflict
	for i := len(j.Records) - 1; i >= 0; i-- {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r := j.Records[i]
		var orig *tree.Entry
		if k, ok := removed[r.Step.Path]; ok && k < i {
			orig = j.Records[k].Step.Old
		}
		if cf := rb.undo(r, orig); cf != nil {
			if !keepExternal {
				return nil, &Error{Code: CodeInterruptedApply,
					Message:   fmt.Sprintf("an apply (%s) was interrupted and %s changed since; wtx will not overwrite it", j.OpID, quote.Path(cf.Path)),
					Conflicts: []Conflict{*cf},
					Repairs: []Repair{
						{Action: "recover", Detail: "after putting the path back, finish the rollback", Command: "wtx recover"},
						{Action: "keep", Detail: "keep the changed paths as they are and roll back the rest", Command: "wtx recover --rollback"},
					}}
			}
			conflicts = append(conflicts, *cf)
			// The path stays as it was changed; what the record left under
			// its temporary names goes (pre-images are in the blob store).
			if d, err := root.OpenDir(tree.Parent(r.Step.Path)); err == nil {
				removeNames(d, tempsWithPrefix(d, r.Tmp))
				d.Close()
			}
		}
		failpoint.Hit("recover:undone")
	}
	// The directories whose entries moved are synced before the journal
	// goes. A temporary name left behind (its removal failed) or a failed
	// sync keeps the journal, so the next recovery does it again: an fsync
	// error is never trusted.
	var errs []error
	for _, r := range j.Records {
		d, err := root.OpenDir(tree.Parent(r.Step.Path))
		if err != nil {
			continue // the directory was removed by the rollback
		}
		// A failed restore may leave its temporary file, and a path back to
		// its pre-image may still have the record's: both are garbage now.
		removeNames(d, tempsWithPrefix(d, tempPrefix+"restore-"))
		if cur, found := rb.entry(d, tree.Base(r.Step.Path)); matches(cur, found, r.Step.Old) {
			removeNames(d, tempsWithPrefix(d, r.Tmp))
		}
		if left := append(tempsWithPrefix(d, r.Tmp), tempsWithPrefix(d, tempPrefix+"restore-")...); len(left) > 0 {
			errs = append(errs, fmt.Errorf("roll back %s: temporary names left in %s: %v", j.OpID, d.Rel(), left))
		}
		if err := d.Sync(); err != nil {
			errs = append(errs, err)
		}
		d.Close()
	}
	if len(errs) > 0 {
		return nil, AsError(errors.Join(errs...))
	}
	return conflicts, nil
}

type rollbacker struct {
	w    *Workspace
	root *fsx.Root
}

// undo restores one record's pre-image if the path holds the post-image or
// an intermediate state the record explains; it returns a conflict if the
// path holds anything else. orig is the path's pre-image when an earlier
// record of the journal removes it (a type change): a path that still holds
// it was never reached by r.
func (rb *rollbacker) undo(r journal.Record, orig *tree.Entry) *Conflict {
	st := r.Step
	d, err := rb.root.OpenDir(tree.Parent(st.Path))
	if err != nil {
		made := st.Kind == tree.StepMkdir || st.Kind == tree.StepDirPerm || st.Old == nil
		if errors.Is(err, fs.ErrNotExist) && (made || st.New == nil) {
			return nil // the directory it would live in is gone: nothing of it remains
		}
		if made && (errors.Is(err, fsx.ErrNotDir) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fsx.ErrSymlink)) {
			return nil // its directory is not (or no longer) one: nothing made here remains
		}
		return &Conflict{Path: st.Path, Kind: "type-changed", Detail: err.Error()}
	}
	defer d.Close()
	name := tree.Base(st.Path)
	cur, found := rb.entry(d, name)
	if orig != nil && found && tree.SameContent(cur, orig) {
		if st.Kind == tree.StepWrite || st.Kind == tree.StepSymlink {
			removeNames(d, tempsWithPrefix(d, r.Tmp))
		}
		return nil
	}
	switch st.Kind {
	case tree.StepChmod:
		if found && cur.Type == tree.File && cur.Perm == st.New.Perm && cur.Digest == st.Old.Digest {
			d.Chmod(name, fs.FileMode(st.Old.Perm))
			return nil
		}
		if found && tree.SameContent(cur, st.Old) {
			return nil
		}
	case tree.StepDirPerm:
		if found && cur.Type == tree.Dir {
			if cur.Perm != st.Old.Perm {
				d.Chmod(name, fs.FileMode(st.Old.Perm))
			}
			return nil
		}
		if !found {
			return nil // made by a step undone later (mkdir)
		}
	case tree.StepMkdir:
		if !found {
			return nil
		}
		if cur.Type == tree.Dir {
			if err := d.Rmdir(name); err == nil || errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return &Conflict{Path: st.Path, Kind: "added-inside-deleted-dir", Detail: "wtx created this directory and something else was put in it after the crash"}
		}
	case tree.StepRmdir:
		if !found {
			if err := d.Mkdir(name, fs.FileMode(st.Old.Perm)); err != nil {
				return &Conflict{Path: st.Path, Kind: "modified", Detail: err.Error()}
			}
			return nil
		}
		if cur.Type == tree.Dir {
			return nil
		}
	case tree.StepRemove:
		if found {
			if tree.SameContent(cur, st.Old) {
				rb.unlinkTemp(d, r.Tmp, r.Ident)
				return nil
			}
			break
		}
		// Moved aside and still there?
		if tst, err := d.Lstat(r.Tmp); err == nil && tst.Ino == r.Ident.Ino {
			if err := d.RenameNoReplace(r.Tmp, d, name); err != nil {
				return &Conflict{Path: st.Path, Kind: "created", Detail: err.Error()}
			}
			return nil
		}
		if err := rb.restore(d, name, st.Old); err != nil {
			return &Conflict{Path: st.Path, Kind: "deleted", Detail: "its pre-image could not be restored: " + err.Error()}
		}
		return nil
	case tree.StepWrite, tree.StepSymlink:
		temps := tempsWithPrefix(d, r.Tmp)
		switch {
		case st.Old == nil && !found:
			removeNames(d, temps)
			return nil
		case st.Old == nil && tree.SameContent(cur, st.New):
			d.Unlink(name)
			removeNames(d, temps)
			return nil
		case st.Old != nil && found && tree.SameContent(cur, st.Old):
			removeNames(d, temps) // the exchange never happened
			return nil
		case st.Old != nil && found && tree.SameContent(cur, st.New):
			for _, t := range temps {
				if tst, err := d.Lstat(t); err == nil && tst.Ino == r.Ident.Ino {
					if err := d.Exchange(t, d, name); err != nil {
						return &Conflict{Path: st.Path, Kind: "modified", Detail: err.Error()}
					}
					d.Unlink(t)
					return nil
				}
			}
			// The displaced pre-image is gone: rebuild it from the blob store.
			if err := d.Unlink(name); err != nil {
				return &Conflict{Path: st.Path, Kind: "modified", Detail: err.Error()}
			}
			if err := rb.restore(d, name, st.Old); err != nil {
				return &Conflict{Path: st.Path, Kind: "deleted", Detail: err.Error()}
			}
			return nil
		case st.Old != nil && !found:
			for _, t := range temps {
				if tst, err := d.Lstat(t); err == nil && tst.Ino == r.Ident.Ino {
					if err := d.RenameNoReplace(t, d, name); err != nil {
						return &Conflict{Path: st.Path, Kind: "created", Detail: err.Error()}
					}
					removeNames(d, tempsWithPrefix(d, r.Tmp))
					return nil
				}
			}
		}
	}
	cf := &Conflict{Path: st.Path, Kind: "modified", Base: sideDigest(st.Old), Current: "absent",
		Detail: "changed after the interrupted apply; left as it is"}
	if found {
		cf.Current = sideDigest(cur)
	}
	return cf
}

// entry reads what name holds now (files are hashed).
func (rb *rollbacker) entry(d *fsx.Dir, name string) (*tree.Entry, bool) {
	st, err := d.Lstat(name)
	if err != nil {
		return nil, false
	}
	e := &tree.Entry{Path: name, Type: tree.TypeOf(st.Mode), Size: st.Size}
	switch e.Type {
	case tree.File:
		e.Perm = uint32(st.Mode.Perm())
		if f, err := d.OpenFile(name); err == nil {
			h := blob.NewHasher()
			io.Copy(h, f)
			f.Close()
			e.Digest = string(h.Digest())
		}
	case tree.Dir:
		e.Perm = uint32(st.Mode.Perm())
	case tree.Symlink:
		e.Target, _ = d.Readlink(name)
	}
	return e, true
}

func (rb *rollbacker) restore(d *fsx.Dir, name string, old *tree.Entry) error {
	a := &applier{ws: rb.w, root: rb.root}
	return a.restore(d, name, old)
}

func (rb *rollbacker) unlinkTemp(d *fsx.Dir, tmp string, ident tree.Stat) {
	if st, err := d.Lstat(tmp); err == nil && st.Ino == ident.Ino {
		d.Unlink(tmp)
	}
}

// tempsWithPrefix lists d's entries whose names start with prefix.
func tempsWithPrefix(d *fsx.Dir, prefix string) []string {
	names, err := d.ReadDir()
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}

func removeNames(d *fsx.Dir, names []string) {
	for _, n := range names {
		d.Unlink(n)
	}
}

// removeTemps deletes what a committed record left under its temporary
// names: moved-aside pre-images and unused temporary files. It fails if
// any is left or the directory cannot be synced.
func removeTemps(root *fsx.Root, r journal.Record) error {
	d, err := root.OpenDir(tree.Parent(r.Step.Path))
	if err != nil {
		return nil // the directory is gone, and its temporary names with it
	}
	defer d.Close()
	names := tempsWithPrefix(d, r.Tmp)
	if len(names) == 0 {
		return nil
	}
	removeNames(d, names)
	if left := tempsWithPrefix(d, r.Tmp); len(left) > 0 {
		return fmt.Errorf("temporary names left in %s: %v", d.Rel(), left)
	}
	return d.Sync()
}

// catchUp advances the base of stage id over the paths that already hold
// their staged state (an op that committed just before a crash left its
// stage's base behind).
func (w *Workspace) catchUp(ctx context.Context, id string) error {
	s, err := w.Stage(ctx, id)
	if err != nil || s.State() != StateOpen {
		return nil
	}
	unlock, err := w.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	cs, err := s.Changes(ctx, nil)
	if err != nil || len(cs.changes) == 0 {
		return err
	}
	root, err := fsx.OpenRoot(w.path)
	if err != nil {
		return AsError(err)
	}
	defer root.Close()
	a := &applier{ws: w, root: root, base: cs.base, ident: map[string]fsx.Stat{}, readOnly: true}
	_, already, _, err := a.check(ctx, cs.changes)
	if err != nil || len(already) == 0 {
		return err
	}
	return s.advanceBase(ctx, cs, already)
}
