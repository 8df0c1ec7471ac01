package wtx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/engine"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/stage"
	"github.com/wtx-dev/wtx/internal/tree"
)

// Each command run in a stage is a checkpoint: its op records every path
// the command changed in the view, with the entry before and after it, and
// the contents before are kept in the blob store (deduplicated; gc keeps
// them while the stage's ops name them). drop-op then puts a run's paths
// back as it does a per-file op's, and rebase --merge knows the original
// of what a command changed.
//
// What the view held before the command is the base itself for the
// stage's first op (nothing changed the view since it opened); otherwise
// the view is scanned before the command starts, and the files the stage
// changed so far are kept then (an earlier run recorded their digests
// only: the contents after a run are kept by the next run, or by the
// apply, which stores what it writes). A content before that the blob
// store lacks is taken from the workspace when its copy still holds it
// (the base content; on a lazy backend nothing else has it); when neither
// has it the run records the digest only, and dropping it refuses for
// that path. Contents go in as one batch per run (one durable commit).

// preRunEntries returns the view's entries before the run's command, or
// nil when they are the base's (seq is the run's op number). The contents
// of the files the stage changed so far are kept on the way: they are
// what the command may replace, and what an earlier run recorded as its
// result without storing it.
func (s *Stage) preRunEntries(ctx context.Context, v stage.View, seq int) ([]tree.Entry, error) {
	if seq <= 1 {
		return nil, nil
	}
	m, err := s.manifest()
	if err != nil {
		return nil, err
	}
	entries, err := v.Scan(ctx, m, s.exclude)
	if err != nil {
		return nil, stagingError(err)
	}
	release, err := s.keepLock(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	batch := s.ws.blobs.NewBatch()
	defer batch.Abort()
	for _, c := range tree.Compare(m.Entries, entries) {
		if c.New == nil || c.New.Type != tree.File || c.New.Digest == "" || s.ws.blobs.Has(blob.Digest(c.New.Digest)) {
			continue
		}
		f, err := v.OpenFile(c.Path)
		if err != nil {
			continue // gone or replaced since the scan: the command will not find it either
		}
		// A file that changed since the scan is kept under its new
		// digest; the scanned content is then not kept.
		_, _, err = batch.Put(ctx, f)
		f.Close()
		if err != nil {
			return nil, AsError(fmt.Errorf("keep %s: %w", quote.Path(c.Path), err))
		}
	}
	if err := batch.Commit(); err != nil {
		return nil, AsError(err)
	}
	return entries, nil
}

// checkpoint returns the paths the run changed, from pre (nil: the base)
// to the view cs was scanned from, and keeps the contents they held
// before where the blob store lacks them.
func (s *Stage) checkpoint(ctx context.Context, pre []tree.Entry, cs *ChangeSet) ([]TxFile, error) {
	if pre == nil {
		pre = cs.base.Entries
	}
	changes := tree.Compare(pre, cs.view)
	if len(changes) == 0 {
		return []TxFile{}, nil
	}
	root, err := s.ws.openRoot()
	if err != nil {
		return nil, AsError(err)
	}
	defer root.Close()
	batch := s.ws.blobs.NewBatch()
	defer batch.Abort()
	files := make([]TxFile, 0, len(changes))
	for _, c := range changes {
		f := TxFile{Path: c.Path}
		if c.Old != nil {
			old := *c.Old
			if b := cs.base.Lookup(c.Path); old.Type == tree.File && old.Digest == "" && b != nil && b.Type == tree.File {
				old.Digest = b.Digest // filled by the scan after the command
			}
			if err := s.keepFromWorkspace(ctx, root, batch, &old); err != nil {
				return nil, err
			}
			side := sideOf(&old)
			f.Before = &side
		}
		if c.New != nil {
			side := sideOf(c.New)
			f.After = &side
		}
		files = append(files, f)
	}
	if err := batch.Commit(); err != nil {
		return nil, AsError(err)
	}
	return files, nil
}

// keepFromWorkspace stores the content of the file entry e from the
// workspace's copy, if the blob store lacks it and that copy still holds
// it (the base content; on a lazy backend nothing else has it). A copy
// that moved leaves it unkept, which only limits what can be put back.
func (s *Stage) keepFromWorkspace(ctx context.Context, root *fsx.Root, batch *blob.Batch, e *tree.Entry) error {
	if e.Type != tree.File || e.Digest == "" || s.ws.blobs.Has(blob.Digest(e.Digest)) {
		return nil
	}
	cur, err := entryAt(ctx, root, e.Path, engine.ContentReader{})
	if err != nil || !cur.HoldsFile(e.Digest) {
		return nil // see above
	}
	// Streamed from the file, so that its holes stay holes in the store.
	d, err := root.OpenDir(tree.Parent(e.Path))
	if err != nil {
		return nil // moved: see above
	}
	defer d.Close()
	f, err := d.OpenFile(tree.Base(e.Path))
	if err != nil {
		return nil // moved: see above
	}
	defer f.Close()
	// Content that changed while it was read is stored under its own
	// digest, which nothing refers to (gc collects it): e stays unkept.
	if _, _, err := batch.Put(ctx, f); err != nil {
		return AsError(fmt.Errorf("keep %s: %w", quote.Path(e.Path), err))
	}
	return nil
}

// entryOfSide is the tree entry a recorded side describes (nil: absent).
func entryOfSide(p string, sd *Side) *tree.Entry {
	if sd == nil {
		return nil
	}
	e := &tree.Entry{Path: p, Size: sd.Size, Digest: sd.Digest, Target: sd.Target}
	switch sd.Type {
	case "file":
		e.Type = tree.File
	case "dir":
		e.Type = tree.Dir
	case "symlink":
		e.Type = tree.Symlink
	default:
		e.Type = tree.Special
	}
	if sd.Mode != "" {
		var perm uint32
		// A mode that is not octal (a damaged record) leaves perm 0: the
		// restored entry then differs from the view, and the change shows.
		_, _ = fmt.Sscanf(sd.Mode, "%o", &perm)
		e.Perm = perm & tree.PermMask
	}
	return e
}

// restoreView sets every path of restore back to its entry (nil: absent)
// in the stage's view, through one plan: removals deepest first, then
// creations parents first, then directory bits. Every file content it
// needs must be in the blob store, or nothing is changed.
func (s *Stage) restoreView(ctx context.Context, v stage.View, restore map[string]*tree.Entry, what string) error {
	m, err := s.manifest()
	if err != nil {
		return err
	}
	cur, err := v.Scan(ctx, m, s.exclude)
	if err != nil {
		return stagingError(err)
	}
	now := &tree.Manifest{Entries: cur}
	// A content the blob store lacks may still be the workspace's.
	root, err := s.ws.openRoot()
	if err != nil {
		return AsError(err)
	}
	defer root.Close()
	batch := s.ws.blobs.NewBatch()
	defer batch.Abort()
	for _, want := range restore {
		if want != nil {
			if err := s.keepFromWorkspace(ctx, root, batch, want); err != nil {
				return err
			}
		}
	}
	if err := batch.Commit(); err != nil {
		return AsError(err)
	}
	var changes []tree.Change
	for p, want := range restore {
		if want != nil && want.Type == tree.Special {
			return errorf(CodeSpecialFile, "%s: %s held a FIFO, socket or device, which wtx cannot put back", what, quote.Path(p))
		}
		if want != nil && want.Type == tree.File {
			if err := s.checkKept(want, what); err != nil {
				return err
			}
		}
		have := now.Lookup(p)
		if tree.SameContent(have, want) {
			continue
		}
		c := tree.Change{Path: p, Old: have, New: want, Action: tree.Modified}
		switch {
		case have == nil:
			c.Action = tree.Added
		case want == nil:
			c.Action = tree.Deleted
		}
		changes = append(changes, c)
	}
	var steps []stage.RestoreStep
	for _, st := range tree.Plan(changes) {
		rs := stage.RestoreStep{Kind: st.Kind, Path: st.Path}
		if st.New != nil {
			rs.Perm, rs.Target, rs.Size = st.New.Perm, st.New.Target, st.New.Size
			if st.Kind == tree.StepWrite {
				d := blob.Digest(st.New.Digest)
				rs.Content = func() (io.ReadCloser, error) { return s.ws.blobs.NewReader(d) }
			}
		}
		steps = append(steps, rs)
	}
	if err := stage.Restore(ctx, v, steps); err != nil {
		return AsError(fmt.Errorf("%s: %w", what, err))
	}
	return nil
}

// checkKept makes sure the content of e is in the blob store, whole.
func (s *Stage) checkKept(e *tree.Entry, what string) error {
	err := errors.New("no digest recorded")
	if e.Digest != "" {
		err = s.ws.blobs.Verify(blob.Digest(e.Digest))
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, blob.ErrCorrupt):
		return &Error{Code: CodeCorrupt, Err: err,
			Message: fmt.Sprintf("%s: the content %s held before (%s) is damaged in the blob store; nothing was changed", what, quote.Path(e.Path), e.Digest),
			Repairs: []Repair{{Action: "fsck", Detail: "check the state root", Command: "wtx fsck"}}}
	case errors.Is(err, blob.ErrMissing) || e.Digest == "":
		return &Error{Code: CodeStateLost, Err: err,
			Message: fmt.Sprintf("%s: the content %s held before is not kept (it was neither in the blob store nor still in the workspace when the command ended); nothing was changed", what, quote.Path(e.Path))}
	}
	return AsError(err)
}

// keepLock holds the blob store lock shared while a run's contents are
// stored and until its op names them.
func (s *Stage) keepLock(ctx context.Context) (func(), error) {
	release, err := s.ws.blobs.Lock(ctx, blob.Shared, time.Now().Add(lockWait))
	if err != nil {
		return nil, storeLockError(err)
	}
	return release, nil
}
