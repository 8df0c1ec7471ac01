package wtx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/journal"
	"github.com/wtx-dev/wtx/internal/tree"
)

// GCOptions configure GC.
type GCOptions struct {
	// OlderThan is how long a stage must have been settled (applied or
	// dropped) before its state is removed; 0 removes every settled
	// stage's. Blobs written less than min(OlderThan, BlobGrace) ago are
	// kept, so a write racing with the collection is never lost.
	OlderThan time.Duration
	// PruneHistory also removes the pre- and post-images of applied ops,
	// which wtx undo and wtx show need. Off by default.
	PruneHistory bool
	// DryRun reports what would be freed and removes nothing.
	DryRun bool
	// StagesOnly removes settled stages' state and leaves the blob store
	// alone: gc of every workspace sweeps the store once, after the last.
	StagesOnly bool
}

// BlobGrace is the most a blob must have aged before GC may remove it.
const BlobGrace = time.Hour

// GCResult says what GC freed.
type GCResult struct {
	// Stages are the settled stages whose state was removed.
	Stages []string `json:"stages"`
	// Blobs is the number of unreferenced blobs removed.
	Blobs int `json:"blobs"`
	// Bytes is the disk space freed, stage directories and blobs together.
	Bytes int64 `json:"bytes"`
	// DryRun is set when nothing was removed on purpose.
	DryRun bool `json:"dry_run"`
	// Kept says what was kept, and why.
	Kept GCKept `json:"kept"`
}

// GCKept counts what a collection kept, by reason.
type GCKept struct {
	// OpenStages are never collected.
	OpenStages int `json:"open_stages"`
	// RecentStages settled less than OlderThan ago; the first of them
	// becomes collectable after NextStageIn.
	RecentStages int           `json:"recent_stages"`
	NextStageIn  time.Duration `json:"next_stage_in_ns,omitempty"`
	// RecentBlobs are unreferenced blobs younger than the grace period
	// (min(OlderThan, BlobGrace)): a writer may be about to record them.
	RecentBlobs int `json:"recent_blobs"`
	// OlderThan is the age a settled stage must reach to be collected.
	OlderThan time.Duration `json:"older_than_ns"`
}

// GC removes the state of settled stages older than opts.OlderThan and the
// blobs that nothing references any more. It never touches an open stage.
//
// The blob store is shared by every workspace of the state root, so what
// a blob is needed for is a question about all of them:
//
//   - the database of the state root holds every workspace's records: a
//     blob is kept while any workspace's open or retained stage's base
//     manifest, per-file op, run (the contents a command changed, before
//     and after) or read names it, or (unless PruneHistory) any op's pre-
//     or post-image, which undo needs; a settled stage's ops and reads
//     stop counting once its directory is gone;
//   - the journals of every workspace (STATE/workspaces/*/journal) name the
//     pre- and post-images of applies that are in flight or were
//     interrupted, which recovery needs; a journal gc cannot read stops
//     the sweep (io.corrupt) rather than guess;
//   - blobs written but not yet recorded anywhere are protected by the
//     blob store's lock: their writers hold it shared (see lock), and the
//     sweep (references and removals) runs with it held exclusively.
//
// Blobs younger than min(OlderThan, BlobGrace) are kept besides; storing
// content again refreshes its blob, so the grace covers reused blobs too.
// GC holds its workspace's lock while it removes stage state.
func (w *Workspace) GC(ctx context.Context, opts GCOptions) (*GCResult, error) {
	unlock, err := w.lockWorkspace(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	res := &GCResult{Stages: []string{}, DryRun: opts.DryRun, Kept: GCKept{OlderThan: opts.OlderThan}}
	now := w.now()
	rows, err := w.db.ListStages(ctx, w.id)
	if err != nil {
		return nil, AsError(err)
	}
	for _, r := range rows {
		if r.State == StateOpen {
			res.Kept.OpenStages++
			continue
		}
		if age := now.Sub(r.UpdatedAt); age < opts.OlderThan {
			if w.stageDirExists(r.ID) {
				res.Kept.RecentStages++
				if in := opts.OlderThan - age; res.Kept.NextStageIn == 0 || in < res.Kept.NextStageIn {
					res.Kept.NextStageIn = in
				}
			}
			continue
		}
		if !w.stageDirExists(r.ID) {
			continue
		}
		res.Stages = append(res.Stages, r.ID)
		res.Bytes += w.stageDiskUsage(r.ID)
		if !opts.DryRun {
			if err := w.removeStageDir(r.ID); err != nil {
				return nil, err
			}
		}
	}
	sort.Strings(res.Stages)
	if opts.StagesOnly {
		return res, nil
	}
	if !failpoint.Disabled("store-lock") {
		release, err := w.blobs.Lock(ctx, blob.Exclusive, time.Now().Add(lockWait))
		if err != nil {
			return nil, storeLockError(err)
		}
		defer release()
	}
	refs, err := w.blobRefs(ctx, opts.PruneHistory)
	if err != nil {
		return nil, err
	}
	if err := w.journalRefs(refs); err != nil {
		return nil, err
	}
	grace := min(opts.OlderThan, BlobGrace)
	walked := 0
	err = w.blobs.Walk(ctx, func(d blob.Digest, size int64) error {
		walked++
		w.progress(PhaseSweep, walked, 0)
		if refs[string(d)] {
			return nil
		}
		if st, err := w.blobs.Stat(d); err != nil || now.Sub(time.Unix(0, st.Mtime)) < grace {
			if err == nil {
				res.Kept.RecentBlobs++
			}
			return nil
		}
		res.Blobs++
		res.Bytes += size
		if opts.DryRun {
			return nil
		}
		if err := w.blobs.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
	if err != nil {
		return nil, stateIOError(w.stateDir, "gc", err)
	}
	if !opts.DryRun {
		// Temporary objects of writers that died: with the store lock held
		// exclusively no live writer has one.
		if _, err := w.blobs.CleanTemp(now.Add(-grace)); err != nil {
			return nil, stateIOError(w.stateDir, "gc", err)
		}
	}
	return res, nil
}

// journalRefs adds the file images of every journal of every workspace of
// the state root: the pre-images an interrupted apply's rollback restores
// and the contents its roll-forward keeps. A journal that is there but
// cannot be read is an error: what it needs is unknown.
func (w *Workspace) journalRefs(refs map[string]bool) error {
	wss, err := w.state.ReadDir(workspaceDirs)
	if err != nil {
		return stateIOError(w.stateDir, "gc: list the workspaces", err)
	}
	for _, id := range wss {
		jd := journal.Dir{Root: w.state, Rel: workspaceDirs + "/" + id + "/" + journalDirName}
		dir := filepath.Join(w.stateDir, filepath.FromSlash(jd.Rel))
		ops, err := jd.Pending()
		if err != nil {
			return stateIOError(w.stateDir, "gc: list the journals in "+dir, err)
		}
		for _, op := range ops {
			j, _, err := jd.Load(op)
			if errors.Is(err, fs.ErrNotExist) {
				continue // never written: the workspace was not touched
			}
			if err != nil {
				return &Error{Code: CodeCorrupt, Err: err,
					Message: fmt.Sprintf("gc: the journal of %s in %s cannot be read (%v); no blob is removed while what it needs is unknown", op, dir, err),
					Repairs: []Repair{{Action: "recover", Detail: "recover the workspace the journal belongs to, then collect again", Command: "wtx recover"}}}
			}
			for _, r := range j.Records {
				for _, e := range []*tree.Entry{r.Step.Old, r.Step.New} {
					if e != nil && e.Digest != "" {
						refs[e.Digest] = true
					}
				}
			}
			if err := collectDigests(j.Body, refs, "the journal of "+op); err != nil {
				return err
			}
		}
	}
	return nil
}

// blobRefs collects every digest that some record of the state root still
// needs.
func (w *Workspace) blobRefs(ctx context.Context, pruneHistory bool) (map[string]bool, error) {
	refs := map[string]bool{}
	wss, err := w.db.ListWorkspaces(ctx)
	if err != nil {
		return nil, AsError(err)
	}
	for _, ws := range wss {
		stages, err := w.db.ListStages(ctx, ws.ID)
		if err != nil {
			return nil, AsError(err)
		}
		for _, r := range stages {
			data, err := w.readManifest(r.ID)
			if err == nil {
				m, err := tree.Decode(data)
				if err != nil {
					return nil, &Error{Code: CodeInternal, Message: fmt.Sprintf("gc: stage %s: %v", r.ID, err), Err: err}
				}
				for _, e := range m.Entries {
					if e.Digest != "" {
						refs[e.Digest] = true
					}
				}
			} else if r.State == StateOpen && w.stageDirExists(r.ID) || isStateDamage(err) {
				return nil, stateIOError(w.stateDir, "gc: read the base manifest of stage "+r.ID, err)
			}
			if r.State != StateOpen && !w.stageDirExists(r.ID) {
				// A settled stage whose state is gone (dropped, or collected
				// above): nothing can use its per-file ops, its runs' kept
				// contents or its reads any more.
				continue
			}
			txops, err := w.db.ListTxOps(ctx, r.ID)
			if err != nil {
				return nil, AsError(err)
			}
			for _, o := range txops {
				if err := collectDigests(o.Body, refs, fmt.Sprintf("stage %s op %d", r.ID, o.Seq)); err != nil {
					return nil, err
				}
			}
			reads, err := w.db.ReadSet(ctx, r.ID)
			if err != nil {
				return nil, AsError(err)
			}
			for _, rd := range reads {
				refs[rd.Digest] = true
			}
		}
		if pruneHistory {
			continue
		}
		ops, err := w.db.ListOps(ctx, ws.ID)
		if err != nil {
			return nil, AsError(err)
		}
		for _, o := range ops {
			if err := collectDigests(o.Body, refs, "op "+o.ID); err != nil {
				return nil, err
			}
		}
	}
	return refs, nil
}

// digestsIn returns every "sha256:…" string in a JSON record. A record
// that does not decode is an error: its references are unknown, so nothing
// it might name can be judged unreferenced.
func digestsIn(raw json.RawMessage) ([]string, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			if strings.HasPrefix(x, "sha256:") {
				out = append(out, x)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out, nil
}

// collectDigests adds every digest a JSON record names to refs. A record
// that cannot be read (what names it) stops the sweep as io.corrupt.
func collectDigests(raw json.RawMessage, refs map[string]bool, what string) error {
	ds, err := digestsIn(raw)
	if err != nil {
		return &Error{Code: CodeCorrupt, Err: err,
			Message: fmt.Sprintf("gc: %s cannot be read (%v): the objects it needs are unknown, so nothing was removed", what, err),
			Repairs: []Repair{{Action: "fsck", Detail: "check the state root", Command: "wtx fsck"}}}
	}
	for _, d := range ds {
		refs[d] = true
	}
	return nil
}
