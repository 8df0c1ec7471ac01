package wtx

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/state"
)

// StateRoot is a state root opened without a workspace: to list, and
// collect garbage across, every workspace it holds.
type StateRoot struct {
	dir   string
	state *fsx.Root
	db    *state.DB
}

// OpenStateRoot opens the state root at stateDir (an absolute path). A
// state root with no database yet holds no workspace: its list is empty.
// It records nothing.
func OpenStateRoot(ctx context.Context, stateDir string) (*StateRoot, error) {
	if stateDir == "" || !filepath.IsAbs(stateDir) {
		return nil, errorf(CodeUsage, "state root %q must be an absolute path", stateDir)
	}
	dir, err := canonicalMaybeMissing(stateDir)
	if err != nil {
		return nil, AsError(err)
	}
	if err := checkDatabasePresent(dir, nil); err != nil {
		return nil, err
	}
	r := &StateRoot{dir: dir}
	p := filepath.Join(dir, dbName)
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	root, err := openStateRoot(dir)
	if err != nil {
		return nil, err
	}
	db, err := state.Open(ctx, p)
	if err != nil {
		_ = root.Close() // read-only handle; the database's error is what counts
		return nil, stateDBError(dir, err)
	}
	r.db, r.state = db, root
	return r, nil
}

// Dir is the state root's canonical path.
func (r *StateRoot) Dir() string { return r.dir }

// Close releases the database.
func (r *StateRoot) Close() error {
	if r.db == nil {
		return nil
	}
	return errors.Join(r.db.Close(), r.state.Close())
}

// Workspaces lists every workspace of the state root, by path.
func (r *StateRoot) Workspaces(ctx context.Context) ([]WorkspaceSummary, error) {
	if r.db == nil {
		return []WorkspaceSummary{}, nil
	}
	w := &Workspace{stateDir: r.dir, state: r.state, db: r.db}
	return w.Workspaces(ctx)
}

// WorkspaceSummary describes one workspace of the state root.
type WorkspaceSummary struct {
	// Path is the workspace's canonical path as last recorded.
	Path string
	// Missing is set when nothing is at Path any more (or it is not a
	// directory): its stages can never be applied there.
	Missing bool
	// Open counts its open stages, Stages every stage it still records;
	// OpenTxs are the open stages' ids.
	Open, Stages int
	OpenTxs      []string
	// Size is the disk its stages' state takes, in bytes.
	Size int64
	// Ops counts its applied ops (what undo and show keep).
	Ops int
}

// Workspaces lists every workspace the state root knows (the one w is
// open on included), by path. It only reads.
func (w *Workspace) Workspaces(ctx context.Context) ([]WorkspaceSummary, error) {
	rows, err := w.db.ListWorkspaces(ctx)
	if err != nil {
		return nil, AsError(err)
	}
	out := make([]WorkspaceSummary, 0, len(rows))
	for _, r := range rows {
		s := WorkspaceSummary{Path: r.Path, OpenTxs: []string{}}
		if fi, err := os.Stat(r.Path); errors.Is(err, fs.ErrNotExist) || (err == nil && !fi.IsDir()) {
			s.Missing = true
		}
		stages, err := w.db.ListStages(ctx, r.ID)
		if err != nil {
			return nil, AsError(err)
		}
		for _, st := range stages {
			s.Stages++
			if st.State == StateOpen {
				s.Open++
				s.OpenTxs = append(s.OpenTxs, st.ID)
			}
			s.Size += w.stageDiskUsage(st.ID)
		}
		links, err := w.db.ListOpLinks(ctx, r.ID)
		if err != nil {
			return nil, AsError(err)
		}
		s.Ops = len(links)
		out = append(out, s)
	}
	return out, nil
}
