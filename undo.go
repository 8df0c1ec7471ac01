package wtx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/state"
	"github.com/wtx-dev/wtx/internal/tree"
	"github.com/wtx-dev/wtx/receipt"
)

// UndoResult reports an undo.
type UndoResult struct {
	OpID    string
	Undoes  string
	Written []string
	Receipt *Receipt
}

// UndoOptions select what an undo takes back.
type UndoOptions struct {
	// Paths are selectors: only the paths of the op they select are taken
	// back (all of them when empty). Each must select a path of the op.
	Paths []string
	// Exclude selectors leave paths of the op as they are; each must
	// select a path of the op.
	Exclude []string
	// Approve allows the undo to write protected paths (protect selectors
	// of the op's stage, .git, the project file), where the workspace's
	// actor may approve (T-003).
	Approve bool
	// Newest takes back the newest apply not wholly undone yet (the op
	// LatestOp(ctx, true) names), chosen when the undo starts, as a named
	// one is: if another undo takes it back while this one waits for the
	// workspace lock, this one is refused rather than taking the next. The
	// ref must then be empty.
	Newest bool
}

// Undo reverses op ref as a new op: every path it wrote gets back what it
// held before, through the same journaled protocol as an apply. It refuses
// without effect (refusal.target-changed) if any of those paths changed
// since the op wrote it; each such conflict names the later op that wrote
// the path, when one did.
func (w *Workspace) Undo(ctx context.Context, ref string) (*UndoResult, error) {
	return w.UndoWith(ctx, ref, UndoOptions{})
}

// UndoWith is Undo of the part of op ref that opts selects: all or nothing
// for the selected paths, with the same checks, recorded as its own op with
// its own receipt. Paths an earlier partial undo took back are left out; an
// op whose paths have all been taken back is undone.
func (w *Workspace) UndoWith(ctx context.Context, ref string, opts UndoOptions) (*UndoResult, error) {
	if err := w.authorize(ActionApply, false); err != nil {
		return nil, err
	}
	sels, err := parsePaths(opts.Paths)
	if err != nil {
		return nil, err
	}
	excl, err := parseExcludes(opts.Exclude)
	if err != nil {
		return nil, err
	}
	// The op is chosen now, before the lock is waited for: a wrong name
	// is told at once, and what was asked for is what gets undone.
	ref, op, links, err := w.chooseUndo(ctx, ref, opts.Newest)
	if err != nil {
		return nil, err
	}
	unlock, err := w.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Read again under the lock, unless no op came or went meanwhile (an
	// op's record never changes, so then neither did the answer).
	latest, err := w.db.ListOpLinks(ctx, w.id)
	if err != nil {
		return nil, AsError(err)
	}
	if op == nil || !slices.Equal(latest, links) {
		if op, err = w.opAmong(ctx, ref, latest); err != nil {
			return nil, err
		}
	}
	if op.UndoneBy != "" {
		return nil, &Error{Code: CodeAlreadyUndone, Message: fmt.Sprintf("op %s was already undone by %s", op.ID, op.UndoneBy)}
	}
	inverse, err := w.undoChanges(ctx, op, sels, excl)
	if err != nil {
		return nil, err
	}
	for _, inv := range inverse {
		if inv.New != nil && inv.New.Type == tree.File && !w.blobs.Has(blob.Digest(inv.New.Digest)) {
			return nil, &Error{Code: CodeStateLost, Message: fmt.Sprintf("op %s: the content %s of %s is no longer in the blob store", op.ID, inv.New.Digest, quote.Path(inv.Path))}
		}
	}
	return w.undoLocked(ctx, op, inverse, opts)
}

// undoLocked writes inverse, the changes that take back the selected paths
// of op, as an undo op, under the workspace lock: every check, then the
// journaled protocol.
func (w *Workspace) undoLocked(ctx context.Context, op *Op, inverse []tree.Change, opts UndoOptions) (*UndoResult, error) {
	root, err := w.openRoot()
	if err != nil {
		return nil, AsError(err)
	}
	defer root.Close()
	// The pre-images the undo displaces that the blob store lacks go into
	// it as one batch, durable before the journal is written.
	batch := w.blobs.NewBatch()
	committed := false
	defer func() {
		if !committed {
			batch.Abort()
		}
	}()
	cas := newCASReader(root, nil)
	cas.progress = func(i, n int) { w.progress(PhaseCheck, i, n) }
	todo, already, conflicts, err := cas.check(ctx, inverse)
	if err != nil {
		return nil, err
	}
	prot, err := w.gateUndo(ctx, op, without(inverse, already), opts.Approve)
	if err != nil {
		return nil, err
	}
	if len(conflicts) > 0 {
		return nil, w.undoRefusal(ctx, op, inverse, conflicts, approves(w.actor, opts.Approve))
	}
	res := &UndoResult{Undoes: op.ID}
	for _, c := range todo {
		res.Written = append(res.Written, c.Path)
	}
	res.Written = nonNil(res.Written)
	if len(todo) == 0 {
		return res, nil
	}
	opID := newID("op", w.now())
	body, err := json.Marshal(opBody{Stage: op.Tx, Paths: nonNil(opts.Paths), Exclude: opts.Exclude, Written: res.Written, ChangesetDigest: tree.ChangesetDigest(todo), Changes: opChanges(todo), Undoes: op.ID})
	if err != nil {
		return nil, AsError(err)
	}
	now := w.now().UTC()
	rc := Receipt{
		SchemaVersion: 1, ID: newID("rc", now), Kind: "undo", Workspace: w.path, Tx: op.Tx, OpID: opID,
		CreatedAt: now, Backend: "", Command: []string{"undo", op.ID}, Paths: append([]string{}, opts.Paths...),
		ChangesetDigest: tree.ChangesetDigest(todo), Counts: receipt.Counts(tree.Count(todo)),
		Protections: len(prot.sels), ProtectedPaths: len(prot.writes(todo)),
		Approved: approves(w.actor, opts.Approve), Actor: w.actor.String(),
		NotTransactional: append([]string(nil), receipt.NotTransactional...),
	}
	rec := &opRecord{Op: state.Op{ID: opID, WorkspaceID: w.id, StageID: op.Tx, Kind: "undo", State: "committed", Body: body, CreatedAt: now}, Receipt: rc}
	if err := keepPreimages(ctx, root, w.blobs, batch, todo, cas.ident); err != nil {
		return nil, err
	}
	if err := batch.Commit(); err != nil {
		return nil, AsError(err)
	}
	committed = true
	if err := w.commitOp(ctx, root, cas.checked(todo), nil, w.writeProgress(nil), rec, nil); err != nil {
		return nil, err
	}
	res.OpID = opID
	res.Receipt = &rec.Receipt
	return res, nil
}

// chooseUndo names the op an undo takes back, chosen before the lock is
// waited for: op ref, or with newest the newest apply not wholly undone
// (ref then empty). It returns the op's ref, its record when it was read,
// and the op links it was chosen among.
func (w *Workspace) chooseUndo(ctx context.Context, ref string, newest bool) (_ string, op *Op, links []state.OpLink, err error) {
	switch {
	case newest && ref != "":
		return "", nil, nil, errorf(CodeUsage, "an undo of the newest apply names no op (got %q)", ref)
	case newest:
		if links, err = w.db.ListOpLinks(ctx, w.id); err != nil {
			return "", nil, nil, AsError(err)
		}
		// Its record is read under the lock, unless it had to be read
		// to choose it.
		if ref, op, err = w.newestLiveApply(ctx, links); err != nil {
			return "", nil, nil, err
		}
	default:
		if op, links, err = w.findOp(ctx, ref); err != nil {
			return "", nil, nil, err
		}
	}
	return ref, op, links, nil
}

// gateUndo asks the gate about an undo of op that writes writes: its
// protected paths are those of the paths it writes, judged by the op's
// stage's protects and the defaults (never by what the op's receipt
// counted). It returns what protects them, for the receipt.
func (w *Workspace) gateUndo(ctx context.Context, op *Op, writes []tree.Change, approve bool) (protection, error) {
	prot, err := w.opProtection(ctx, op)
	if err != nil {
		return prot, err
	}
	if pps := prot.writes(writes); len(pps) > 0 && !mayWriteProtected(w.actor, approve) {
		return prot, w.undoProtected(op, pps, approve, len(pps) < len(writes))
	}
	return prot, nil
}

// opProtection is what protects the paths op wrote, and so an undo of it:
// the protect selectors of the stage it belongs to (an undo belongs to the
// stage of the op it undid) and the defaults. A stage whose record is gone
// (stage records are never deleted: only damage does it) protects every
// path: the undo then needs approval.
func (w *Workspace) opProtection(ctx context.Context, op *Op) (protection, error) {
	row, err := w.db.GetStage(ctx, op.Tx)
	if err != nil {
		if errors.Is(err, state.ErrNotFound) {
			return protection{unknown: true}, nil
		}
		return protection{}, AsError(err)
	}
	st, err := w.stageFromRow(row)
	if err != nil {
		return protection{}, err
	}
	if err := st.liveProtection(true); err != nil {
		return protection{}, err
	}
	return st.protection(), nil
}

// undoProtected refuses an undo that writes protected paths without an
// approval its actor may give. The repairs are data: approve the undo (a
// person, or an actor that may), or take back only the other paths when
// there are any (rest).
func (w *Workspace) undoProtected(op *Op, pps []ProtectedPath, asked, rest bool) *Error {
	cfs := make([]Conflict, len(pps))
	for i, p := range pps {
		cfs[i] = Conflict{Path: p.Path, Kind: "protected", Detail: p.Detail()}
	}
	msg := fmt.Sprintf("undo of %s writes %d protected path(s); first: %s (%s); an undo writes them only when approved", op.ID, len(pps), quote.Path(pps[0].Path), pps[0].Detail())
	if asked && VerdictOf(w.actor, ActionWriteProtected) != WithApproval {
		msg = fmt.Sprintf("approval refused: %s may not approve protected paths; undo of %s writes %d of them; first: %s (%s)", w.actor.phrase(), op.ID, len(pps), quote.Path(pps[0].Path), pps[0].Detail())
	}
	repairs := []Repair{{Action: RepairApprove, Class: ClassProtected, Op: op.ID, Paths: protectedPaths(pps), Detail: "undo it with the protected paths approved"}}
	if rest {
		repairs = append(repairs, Repair{Action: RepairExclude, Class: ClassProtected, Op: op.ID, Paths: protectedPaths(pps), Detail: "take back the rest; the protected paths stay as they are"})
	}
	return &Error{Code: CodeProtected, Message: msg, Conflicts: cfs, Repairs: repairs}
}
