package wtx

import (
	"context"
	"time"

	"github.com/wtx-dev/wtx/internal/flowlink"
	"github.com/wtx-dev/wtx/internal/state"
	"github.com/wtx-dev/wtx/internal/tree"
)

// The workspace internals package flow needs that the public API does not
// offer (see internal/flowlink).
func init() {
	flowlink.Root = &flowlink.Link[*Workspace, *Stage, *ChangeSet, *ApplyOptions, BatchItem]{
		DB:            func(w *Workspace) *state.DB { return w.db },
		ID:            func(w *Workspace) string { return w.id },
		Now:           func(w *Workspace) time.Time { return w.now() },
		StateDir:      func(w *Workspace) string { return w.workspaceStateDir() },
		AuthorizeDrop: func(w *Workspace) error { return w.authorize(ActionDrop, false) },
		DropChecked:   func(ctx context.Context, s *Stage, check func() error) error { return s.dropChecked(ctx, check) },
		SetAttempt:    func(s *Stage, attempt string) { s.flowAttempt = attempt },
		StagedFile:    stagedContent,
		AllChanges:    func(c *ChangeSet) []tree.Change { return c.all },
		ResultDigest: func(c *ChangeSet) string {
			if c.base == nil {
				return ""
			}
			return tree.ResultDigest(c.base.Entries, c.all)
		},
		AsAgent: func(a *ApplyOptions) {
			agent := ActorFlowAgent
			a.actor = &agent
		},
		BatchItem: func(o flowlink.BatchOp) (BatchItem, error) {
			return batchItemJSON{Command: o.Command, Path: o.Path, PathB64: o.PathB64, Content: o.Content, ContentB64: o.ContentB64,
				Old: o.Old, OldB64: o.OldB64, New: o.New, NewB64: o.NewB64, All: o.All, ExpectHash: o.ExpectHash}.item()
		},
		NewID:       newID,
		ValidName:   nameRE.MatchString,
		ValidOpPath: validOpPath,
	}
}

// stagedContent is the content of path as s holds it (nil: none).
func stagedContent(ctx context.Context, s *Stage, path string) ([]byte, error) {
	v, err := s.view(ctx)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	_, data, err := stagedFile(v, path)
	return data, err
}
