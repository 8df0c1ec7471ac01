package wtx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wtx-dev/wtx/internal/stage"
	"github.com/wtx-dev/wtx/internal/state"
)

// ForkOptions configure Fork.
type ForkOptions struct {
	// Name is an optional name for the new stage, unique among the
	// workspace's open stages.
	Name string
}

// Fork opens a new stage with the same base as s and a copy of its staged
// state: its view, its base manifest, its per-file ops and its read set.
// From then on the two are independent: a write into one never shows in
// the other, and each is applied or dropped on its own.
func (s *Stage) Fork(ctx context.Context, opts ForkOptions) (*Stage, error) {
	if opts.Name != "" && (!nameRE.MatchString(opts.Name) || (len(opts.Name) > 3 && opts.Name[:3] == "tx-")) {
		return nil, errorf(CodeUsage, "stage name %q: use 1-64 letters, digits, '.', '_' or '-', not starting with 'tx-'", opts.Name)
	}
	if err := s.checkUsable(); err != nil {
		return nil, err
	}
	release, err := s.holdShared(ctx, "fork")
	if err != nil {
		return nil, err
	}
	defer release()
	// A fork writes no blob (the ops it copies name blobs the original's
	// already keep), so the blob store lock is left to others.
	unlock, err := s.ws.lockWorkspace(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if row, err := s.ws.db.GetStage(ctx, s.ID()); err == nil {
		s.row = row
	}
	if s.row.State != StateOpen {
		if err := s.checkUsable(); err != nil {
			return nil, err
		}
	}
	if err := s.settleFileOpsLocked(ctx); err != nil {
		return nil, err
	}
	now := s.ws.now().UTC()
	id := newID("tx", now)
	dir := s.ws.stageDir(id)
	if err := stage.Fork(ctx, s.ws.stageDir(s.ID()), dir); err != nil {
		_ = s.ws.removeStageDir(id) // said in the log; the fork's error is what counts
		return nil, stagingError(err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = s.ws.removeStageDir(id) // said in the log; the fork's error is what counts
		}
	}()
	txops, err := s.ws.db.ListTxOps(ctx, s.ID())
	if err != nil {
		return nil, AsError(err)
	}
	reads, err := s.ws.db.ReadSet(ctx, s.ID())
	if err != nil {
		return nil, AsError(err)
	}
	cfg := s.cfg
	cfg.Ops = nil // the ops that landed belong to s
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, AsError(err)
	}
	row := state.Stage{ID: id, WorkspaceID: s.ws.id, Name: opts.Name, Backend: s.row.Backend, State: StateOpen,
		BaseDigest: s.row.BaseDigest, Config: raw, CreatedAt: now, UpdatedAt: now}
	err = s.ws.db.Tx(ctx, func(tx *state.Txn) error {
		if err := tx.InsertStage(ctx, row); err != nil {
			return err
		}
		for _, o := range txops {
			o.StageID = id
			if err := tx.InsertTxOp(ctx, o); err != nil {
				return err
			}
		}
		for _, r := range reads {
			r.StageID = id
			if err := tx.PutRead(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, state.ErrNameTaken) {
			return nil, errorf(CodeNameTaken, "an open stage of this workspace is already named %q", opts.Name)
		}
		return nil, AsError(fmt.Errorf("fork %s: %w", s.ID(), err))
	}
	ok = true
	return s.ws.stageFromRow(row)
}

// DiskUsage returns the bytes of disk the stage's own directory takes (0
// once it was dropped or collected). Clones share their blocks with the
// workspace until written, so this is an upper bound for a clone stage.
func (s *Stage) DiskUsage() int64 {
	return s.ws.stageDiskUsage(s.ID())
}
