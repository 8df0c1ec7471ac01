package wtx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/journal"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/state"
	"github.com/wtx-dev/wtx/internal/tree"
)

func (w *Workspace) journalDir() string {
	return filepath.Join(w.workspaceStateDir(), journalDirName)
}

// journalDirName is the journal root's name in a workspace's directory.
const journalDirName = "journal"

// journals is where the journals of the workspace's applies live,
// beneath the open state root.
func (w *Workspace) journals() journal.Dir {
	return journal.Dir{Root: w.state, Rel: w.workspaceRel() + "/" + journalDirName}
}

// commitOp runs the write-ahead protocol for changes, which a casReader
// has verified and whose pre-images are in the blob store: journal the whole
// plan durably, execute it with x, sync, mark it committed, clean up, record
// it, settle what it belongs to (settle, when not nil: an apply advances its
// stage), and drop the journal. On an error before the commit marker
// everything done is undone and nothing is recorded. After it, the journal
// goes only once the op is recorded and settled, so that a crash anywhere in
// between is finished by recovery exactly as the apply would have finished.
func (w *Workspace) commitOp(ctx context.Context, x *executor, rec *opRecord, changes []tree.Change, settle func() error) error {
	recs := x.records(rec.Op.ID, tree.Plan(changes))
	rec.Receipt.Digest = rec.Receipt.ComputeDigest()
	// Signed before anything is written: a key that cannot sign stops the
	// op here, with nothing changed.
	signed, err := w.receiptBody(rec.Receipt)
	if err != nil {
		return err
	}
	rec.Signed = signed
	body, err := json.Marshal(rec)
	if err != nil {
		return AsError(err)
	}
	j := &journal.Journal{OpID: rec.Op.ID, Kind: rec.Op.Kind, StageID: rec.Op.StageID, Workspace: w.path, Body: body, Records: recs}
	failpoint.Hit("apply:before-journal")
	if failpoint.Disabled("journal") {
		j.Records = nil // negative control: recovery then has nothing to go on
	}
	if err := w.journals().Write(j); err != nil {
		_ = w.journals().Remove(rec.Op.ID) // nothing was touched yet; a leftover is recovery's to remove
		return stateIOError(w.stateDir, "write the journal of "+rec.Op.ID, err)
	}
	failpoint.Hit("apply:journaled")
	if err := x.prepareTemps(recs); err != nil {
		if !x.dropPretemps(recs) {
			// A temporary file stays in the workspace: so does the
			// journal, and recovery removes it.
			return &Error{Code: CodeInternal, Message: fmt.Sprintf("write the new contents: %v; temporary files are left for recovery", err)}
		}
		w.journals().Remove(rec.Op.ID)
		return AsError(fmt.Errorf("write the new contents: %w", err))
	}
	err = x.execute(ctx, recs)
	dropped := x.dropPretemps(recs)
	if err != nil {
		var e *Error
		if errors.As(err, &e) && e.Code == CodeInternal || !dropped {
			// Not fully undone: the journal stays for recovery.
			return err
		}
		w.journals().Remove(rec.Op.ID)
		return allChanged(ctx, x.root, changes, err)
	}
	failpoint.Hit("apply:synced")
	if err := w.journals().Commit(rec.Op.ID); err != nil {
		// Without a durable marker the op is not committed: undo it. A
		// marker that was written but not synced goes first, so that a
		// recovery after a failed rollback rolls back too: a reported
		// failure must leave no effect.
		if uerr := w.journals().Uncommit(rec.Op.ID); uerr != nil {
			e := AsError(fmt.Errorf("commit %s: %w; and its marker cannot be removed (%v): the apply may have landed, and recovery finishes it", rec.Op.ID, err, uerr))
			e.Repairs = append(e.Repairs, Repair{Action: "recover", Detail: "recover the workspace to learn whether the apply landed", Command: "wtx recover"})
			return e
		}
		if rerr := w.rollback(ctx, j); rerr != nil {
			return AsError(fmt.Errorf("commit %s: %w; rollback: %v", rec.Op.ID, err, rerr))
		}
		w.journals().Remove(rec.Op.ID)
		return AsError(fmt.Errorf("commit %s: %w", rec.Op.ID, err))
	}
	failpoint.Hit("apply:committed")
	// Past the marker the op has happened: an interrupt (Ctrl-C) no longer
	// stops it, the rest (record, settle, drop the journal) runs to the end
	// so the caller can say it finished.
	if !failpoint.Disabled("finish-after-commit") {
		ctx = context.WithoutCancel(ctx)
	}
	clean := x.cleanup()
	if err := w.recordOp(ctx, *rec); err != nil {
		return landed(rec, "recording it", err)
	}
	failpoint.Hit("apply:recorded")
	if settle != nil {
		if err := settle(); err != nil {
			// The journal stays: recovery settles the stage.
			return landed(rec, "settling its stage", err)
		}
	}
	failpoint.Hit("apply:settled")
	if !clean {
		// Committed, but a moved-aside pre-image is still in the workspace:
		// the journal stays and the next command's recovery removes it.
		return nil
	}
	if err := w.journals().Remove(rec.Op.ID); err != nil {
		return landed(rec, "removing its journal", err)
	}
	failpoint.Hit("apply:done")
	return nil
}

// landed is the error of a step after the commit marker: the op is in the
// workspace, and the journal it keeps lets the next command's recovery
// finish what failed. The code stays the cause's.
func landed(rec *opRecord, what string, err error) error {
	e := *AsError(err)
	e.Message = fmt.Sprintf("%s %s landed in the workspace, but %s failed (%s); the next wtx command finishes it", rec.Op.Kind, rec.Op.ID, what, e.Error())
	e.Err = err
	return &e
}

// recordOp inserts the op and its receipt unless they are already there.
func (w *Workspace) recordOp(ctx context.Context, rec opRecord) error {
	if _, err := w.db.GetOp(ctx, rec.Op.ID); err == nil {
		return nil
	}
	body := []byte(rec.Signed)
	if len(body) == 0 {
		var err error
		if body, err = w.receiptBody(rec.Receipt); err != nil {
			return AsError(err)
		}
	}
	record, err := noteRecorder(&rec)
	if err != nil {
		return err
	}
	err = w.db.Tx(ctx, func(tx *state.Txn) error {
		if err := tx.InsertOp(ctx, rec.Op); err != nil {
			return err
		}
		if err := tx.InsertReceipt(ctx, state.Receipt{ID: rec.Receipt.ID, Kind: rec.Receipt.Kind, WorkspaceID: w.id,
			StageID: rec.Receipt.Tx, OpID: rec.Op.ID, Body: body, CreatedAt: rec.Receipt.CreatedAt}); err != nil {
			return err
		}
		if record == nil {
			return nil
		}
		failpoint.Hit("flow:record-step")
		return record(ctx, tx, rec.Step, rec.Op.CreatedAt)
	})
	if err != nil {
		return AsError(fmt.Errorf("record op %s: %w", rec.Op.ID, err))
	}
	return nil
}

// allChanged completes the refusal of an op that met a path changed outside
// it while it ran (err, naming that first path), now that everything done is
// undone: every path of changes that holds neither what the op expected
// there nor what it meant to write is listed, so the repair is made once
// rather than path by path. Any other error is returned as it is.
func allChanged(ctx context.Context, root *fsx.Root, changes []tree.Change, err error) error {
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeTargetChanged || len(e.Conflicts) != 1 || failpoint.Disabled("all-changed") {
		return err
	}
	_, _, found, cerr := newCASReader(root, nil).check(context.WithoutCancel(ctx), changes)
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
	return &Error{Code: CodeTargetChanged,
		Message:   fmt.Sprintf("%d path(s) changed outside the stage while it was applied; first: %s (%s); nothing was written", len(all), quote.Path(all[0].Path), all[0].Kind),
		Conflicts: all}
}
