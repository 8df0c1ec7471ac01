package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/journal"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/tree"
)

// Phase says which part of the protocol a progress report is about.
type Phase uint8

// Phases. The numbers are not persisted.
const (
	// PhaseWrite: an op's steps run in the workspace.
	PhaseWrite Phase = iota + 1
	// PhaseRecover: an interrupted op is rolled back or finished.
	PhaseRecover
)

// Store is one workspace as the engine writes it: its tree, the blob store
// that holds the content it writes and displaces, and its journals.
type Store struct {
	Root  *fsx.Root
	Blobs *blob.Store
	// Journals is where the journals of the workspace's ops live.
	Journals journal.Dir
	// Workspace is the workspace's path, recorded in each journal.
	Workspace string
	// Progress, if set, hears of each step as it runs (i of n).
	Progress func(p Phase, i, n int)
	// Held, if set, returns the content of a small payload the caller read
	// into memory already (nil, false: none is).
	Held func(blob.Digest) ([]byte, bool)
	// Internal reports whether the caller classes the cause of a failed
	// step as internal (of no known kind): such a failure keeps its
	// journal, although it was undone, for recovery to look at. Nil: no
	// cause is.
	Internal func(error) bool
}

// Op names an op for its journal; Body is the caller's record of it,
// opaque here, which recovery hands back.
type Op struct {
	ID, Kind, StageID string
	Body              []byte
}

// Finish is what runs after an op's commit marker: Record records the op
// (one transaction of the caller's), Settle, when set, settles what it
// belongs to (an apply advances its stage). Each must do nothing when
// done already: recovery runs them again after a crash.
type Finish struct {
	Record func(ctx context.Context) error
	Settle func(ctx context.Context) error
}

// Commit runs the write-ahead protocol for the changes c.Todo, which Check
// has verified (c.Ident) and whose pre-images are in the blob store
// (KeepPreimages): journal the whole plan durably, execute it, sync, mark
// it committed, clean up, record it, settle it (f), and drop the journal.
// On an error before the commit marker everything done is undone and
// nothing is recorded. After it, the journal goes only once the op is
// recorded and settled, so that a crash anywhere in between is finished by
// recovery exactly as the op would have finished.
func (s *Store) Commit(ctx context.Context, op Op, c *Checked, f Finish) error {
	x := newExecutor(s.Root, s.Blobs, c.Ident, s.progress(PhaseWrite))
	x.held = s.Held
	recs := x.records(op.ID, tree.Plan(c.Todo))
	j := &journal.Journal{OpID: op.ID, Kind: op.Kind, StageID: op.StageID, Workspace: s.Workspace, Body: op.Body, Records: recs}
	if err := s.write(ctx, x, j, c.Todo); err != nil {
		return err
	}
	hit("apply:committed")
	// Past the marker the op has happened: an interrupt (Ctrl-C) no longer
	// stops it, the rest (record, settle, drop the journal) runs to the end
	// so the caller can say it finished.
	if !failpoint.Disabled("finish-after-commit") {
		ctx = context.WithoutCancel(ctx)
	}
	clean := x.cleanup()
	if err := f.Record(ctx); err != nil {
		return landed(op, "recording it", err)
	}
	hit("apply:recorded")
	if f.Settle != nil {
		if err := f.Settle(ctx); err != nil {
			// The journal stays: recovery settles the stage.
			return landed(op, "settling its stage", err)
		}
	}
	hit("apply:settled")
	if !clean {
		// Committed, but a moved-aside pre-image is still in the workspace:
		// the journal stays and the next command's recovery removes it.
		return nil
	}
	if err := s.Journals.Remove(op.ID); err != nil {
		return landed(op, "removing its journal", err)
	}
	hit("apply:done")
	return nil
}

// write journals j, runs its plan (the records j was made with) with x
// and writes its commit marker. On an error nothing of the op is left in
// the workspace, or its journal stays for recovery to finish the rollback.
func (s *Store) write(ctx context.Context, x *executor, j *journal.Journal, todo []tree.Change) error {
	recs := j.Records
	hit("apply:before-journal")
	if failpoint.Disabled("journal") {
		j.Records = nil // negative control: recovery then has nothing to go on
	}
	if err := s.Journals.Write(j); err != nil {
		_ = s.Journals.Remove(j.OpID) // nothing was touched yet; a leftover is recovery's to remove
		return &Error{Kind: ErrJournal, What: "write the journal of " + j.OpID, Err: err}
	}
	hit("apply:journaled")
	if err := x.prepareTemps(recs); err != nil {
		if !x.dropPretemps(recs) {
			// A temporary file stays in the workspace: so does the
			// journal, and recovery removes it.
			return notUndone(fmt.Sprintf("write the new contents: %v; temporary files are left for recovery", err))
		}
		_ = s.Journals.Remove(j.OpID) // nothing is left in the workspace; a leftover journal is recovery's to remove
		return cause(fmt.Errorf("write the new contents: %w", err))
	}
	err := x.execute(ctx, recs)
	dropped := x.dropPretemps(recs)
	if err != nil {
		if s.internal(err) || !dropped {
			// Not fully undone: the journal stays for recovery.
			return err
		}
		_ = s.Journals.Remove(j.OpID) // undone; a leftover journal is recovery's to remove
		return s.allChanged(ctx, todo, err)
	}
	hit("apply:synced")
	if err := s.Journals.Commit(j.OpID); err != nil {
		return s.uncommit(ctx, j, err)
	}
	return nil
}

// uncommit undoes op j whose commit marker could not be written (err).
// Without a durable marker the op is not committed. A marker that was
// written but not synced goes first, so that a recovery after a failed
// rollback rolls back too: a reported failure must leave no effect.
func (s *Store) uncommit(ctx context.Context, j *journal.Journal, err error) error {
	if uerr := s.Journals.Uncommit(j.OpID); uerr != nil {
		return &Error{Kind: ErrMarkerInDoubt, Err: fmt.Errorf("commit %s: %w; and its marker cannot be removed (%v): the apply may have landed, and recovery finishes it", j.OpID, err, uerr)}
	}
	if _, rerr := s.RollBack(ctx, j, false); rerr != nil {
		return cause(fmt.Errorf("commit %s: %w; rollback: %v", j.OpID, err, rerr))
	}
	_ = s.Journals.Remove(j.OpID) // rolled back; a leftover journal is recovery's to remove
	return cause(fmt.Errorf("commit %s: %w", j.OpID, err))
}

// internal reports whether a failed op's error keeps its journal although
// the op was undone: an internal failure (see Store.Internal). The end of
// ctx, met between steps, is not one.
func (s *Store) internal(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Kind {
	case ErrNotUndone:
		return true
	case ErrCause:
		return s.Internal != nil && s.Internal(e.Err)
	}
	return false
}

// progress returns the progress hook of phase p, or nil.
func (s *Store) progress(p Phase) func(i, n int) {
	if s.Progress == nil {
		return nil
	}
	return func(i, n int) { s.Progress(p, i, n) }
}

// landed is the error of a step after the commit marker: the op is in the
// workspace, and the journal it keeps lets the next recovery finish what
// failed.
func landed(op Op, what string, err error) error {
	return &Error{Kind: ErrLanded, OpKind: op.Kind, OpID: op.ID, What: what, Err: err}
}

// allChanged completes the refusal of an op that met a path changed outside
// it while it ran (err, naming that first path), now that everything done is
// undone: every path of changes that holds neither what the op expected
// there nor what it meant to write is listed, so the repair is made once
// rather than path by path. Any other error is returned as it is.
func (s *Store) allChanged(ctx context.Context, changes []tree.Change, err error) error {
	var e *Error
	if !errors.As(err, &e) || e.Kind != ErrChanged || len(e.Conflicts) != 1 || failpoint.Disabled("all-changed") {
		return err
	}
	_, _, found, cerr := newCASReader(s.Root, nil).check(context.WithoutCancel(ctx), changes)
	if cerr != nil {
		return err // the first conflict still stands
	}
	all := slices.Clone(e.Conflicts)
	for _, c := range found {
		if !slices.ContainsFunc(all, func(k Conflict) bool { return k.Path == c.Path }) {
			all = append(all, c)
		}
	}
	if len(all) == 1 {
		return err
	}
	return &Error{Kind: ErrChanged,
		Msg:       fmt.Sprintf("%d path(s) changed outside the stage while it was applied; first: %s (%s); nothing was written", len(all), quote.Path(all[0].Path), all[0].Kind),
		Conflicts: all}
}
