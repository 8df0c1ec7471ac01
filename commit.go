package wtx

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/engine"
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/journal"
	"github.com/wtx-dev/wtx/internal/state"
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

// commitOp signs rec's receipt and runs the write-ahead protocol
// (engine.Store.Commit) for the changes of chk, verified by a check and
// whose pre-images are in the blob store: the plan is journaled, executed
// on the workspace at root (held: payloads in memory; progress: its
// steps), committed, recorded with recordOp, and settled (settle, when not
// nil: an apply advances its stage). On an error before the commit marker
// everything done is undone and nothing is recorded; after it, recovery
// finishes what a crash left.
func (w *Workspace) commitOp(ctx context.Context, root *fsx.Root, chk *engine.Checked, held func(blob.Digest) ([]byte, bool), progress func(i, n int), rec *opRecord, settle func() error) error {
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
	s := w.engineStore(root, progress)
	s.Held = held
	op := engine.Op{ID: rec.Op.ID, Kind: rec.Op.Kind, StageID: rec.Op.StageID, Body: body}
	fin := engine.Finish{Record: func(ctx context.Context) error { return w.recordOp(ctx, *rec) }}
	if settle != nil {
		fin.Settle = func(context.Context) error { return settle() }
	}
	return w.engineError(s.Commit(ctx, op, chk, fin))
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
