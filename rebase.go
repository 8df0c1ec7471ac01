package wtx

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/engine"
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/stage"
	"github.com/wtx-dev/wtx/internal/textdiff"
	"github.com/wtx-dev/wtx/internal/tree"
)

// RebaseResult reports a rebase.
type RebaseResult struct {
	// Rebased lists the drifted paths whose edits were re-run on the
	// workspace's current content; Merged those merged three-way.
	Rebased []string `json:"rebased"`
	Merged  []string `json:"merged"`
	// Conflicted lists the merged paths where both sides changed the same
	// lines: they hold conflict markers now, and apply refuses them until
	// the markers are gone (edit them out, or Resolve).
	Conflicted []string `json:"conflicted"`
}

// Rebase moves the stage onto the workspace's current state for every path
// it changed that drifted (changed in the workspace since the stage
// opened). A path whose ops are all content-based edits (--old/--new,
// without an expected hash) gets them re-run on the workspace's current
// content. With merge, any other path (one whose edits no longer apply
// included) that is text and whose original content is known is merged
// three-way (the stage's changes and the
// workspace's both land; overlapping ones refuse): a command run keeps
// the original content of what it changed (checkpoint.go), so what a
// command changed merges too. Lines both sides changed are written
// between conflict markers and the path is marked conflicted (see
// conflictmarks.go). Anything else — a whole write, a removal,
// an op with an expected hash, a command run without a checkpoint, a path
// whose original is not known — makes the rebase fail, and then the stage
// is left exactly as it was.
func (s *Stage) Rebase(ctx context.Context, merge bool) (*RebaseResult, error) {
	return s.rebase(ctx, merge, false)
}

// rebase is Rebase; a trial computes every new content (re-run edits,
// three-way merges) as the rebase would, in memory, and stops before it
// writes or stores anything: its error is the one the rebase would meet.
func (s *Stage) rebase(ctx context.Context, merge, trial bool) (*RebaseResult, error) {
	v, fo, release, err := s.lockedFileOps(ctx, "rebase")
	if err != nil {
		return nil, err
	}
	defer release()
	cs, err := s.Changes(ctx, nil)
	if err != nil {
		return nil, err
	}
	root, err := s.ws.openRoot()
	if err != nil {
		return nil, AsError(err)
	}
	defer root.Close()
	ops, err := s.TxOps(ctx)
	if err != nil {
		return nil, err
	}
	rb := &rebaser{s: s, v: v, root: root, cs: cs, ops: ops}
	plans, res, failures, err := rb.plan(ctx, merge, trial)
	if err != nil {
		return nil, err
	}
	if len(failures) > 0 {
		return nil, rb.refusal(ctx, merge, failures)
	}
	if len(plans) == 0 || trial {
		return res.sorted(), nil
	}
	if err := rb.write(ctx, fo, plans); err != nil {
		return nil, err
	}
	return res.sorted(), nil
}

// rebaser holds what one rebase reads: the stage's view, the workspace,
// the change set and the stage's ops.
type rebaser struct {
	s    *Stage
	v    stage.View
	root *fsx.Root
	cs   *ChangeSet
	ops  []TxOp
}

// rebasePlan is the new content of one drifted path and its new base.
type rebasePlan struct {
	path    string
	content []byte
	perm    uint32
	cur     string // the workspace's current digest: the new base
	mark    *ConflictMark
}

func (r *RebaseResult) sorted() *RebaseResult {
	sort.Strings(r.Rebased)
	sort.Strings(r.Merged)
	sort.Strings(r.Conflicted)
	return r
}

// plan computes the new content of every drifted path, or why it cannot
// be carried.
func (rb *rebaser) plan(ctx context.Context, merge, trial bool) ([]rebasePlan, *RebaseResult, []Conflict, error) {
	_, _, drift, err := newCASReader(rb.root, rb.cs.base).check(ctx, rb.cs.changes)
	if err != nil {
		return nil, nil, nil, err
	}
	res := &RebaseResult{Rebased: []string{}, Merged: []string{}, Conflicted: []string{}}
	var plans []rebasePlan
	var failures []Conflict
	for _, d := range drift {
		pl, failure, err := rb.planPath(ctx, d, merge, trial)
		switch {
		case err != nil:
			return nil, nil, nil, err
		case failure != nil:
			failures = append(failures, *failure)
			continue
		}
		plans = append(plans, pl.rebasePlan)
		switch {
		case pl.mark != nil:
			res.Merged = append(res.Merged, pl.path)
			res.Conflicted = append(res.Conflicted, pl.path)
		case pl.merged:
			res.Merged = append(res.Merged, pl.path)
		default:
			res.Rebased = append(res.Rebased, pl.path)
		}
	}
	return plans, res, failures, nil
}

// touching are the stage's ops that changed p; rerunnable says whether
// they are all content-based edits that can be re-run (and no command run
// without a checkpoint could have changed p unseen).
func (rb *rebaser) touching(p string) (touching []TxOp, rerunnable bool) {
	rerunnable = true
	for _, op := range rb.ops {
		for _, f := range op.Files {
			if f.Path == p && op.Kind != "read" {
				touching = append(touching, op)
				if op.Kind != "edit" || op.ExpectHash != "" {
					rerunnable = false
				}
			}
		}
		// A run that kept no checkpoint may have changed the path too
		// without saying so: only a merge can carry it.
		if op.Kind == "run" && !op.Checkpoint {
			rerunnable = false
		}
	}
	return touching, rerunnable
}

// planPath plans one drifted path: its edits re-run on the workspace's
// content, else (with merge) a three-way merge.
func (rb *rebaser) planPath(ctx context.Context, d Conflict, merge, trial bool) (*rebasePlanned, *Conflict, error) {
	p := d.Path
	at, err := entryAt(ctx, rb.root, p, engine.ContentReader{})
	if err != nil {
		return nil, nil, err
	}
	if !at.Found() || at.Entry.Type != tree.File {
		return nil, &Conflict{Path: p, Kind: d.Kind, Detail: "the workspace no longer holds a file there; nothing to re-run the edits on"}, nil
	}
	cur := at.Entry.Digest
	theirs, err := rb.s.ws.readWorkspaceFile(rb.root, p, cur)
	if err != nil {
		return nil, nil, err
	}
	// Kept: after the rebase it is the path's base, the original a later
	// merge needs.
	if !trial {
		if _, err := rb.s.ws.blobs.PutBytes(ctx, theirs); err != nil {
			return nil, nil, AsError(err)
		}
	}
	pl := &rebasePlanned{rebasePlan: rebasePlan{path: p, perm: 0o644, cur: cur}}
	if c := findTreeChange(rb.cs.changes, p); c != nil && c.New != nil {
		pl.perm = c.New.Perm
	}
	touching, rerunnable := rb.touching(p)
	if len(touching) > 0 && rerunnable {
		content, failure := rerunEdits(p, theirs, touching)
		switch {
		case failure == nil:
			pl.content = content
			return pl, nil, nil
		case !merge:
			return nil, failure, nil
		}
		// An edit that no longer applies is merged three-way instead.
	}
	if !merge {
		return nil, &Conflict{Path: p, Kind: "rebase", Detail: "its ops are not all content-based edits (a whole write, a removal, an expected hash or a command run)"}, nil
	}
	return rb.merge3(ctx, pl, touching, theirs, trial)
}

// rebasePlanned is a plan with how it was made.
type rebasePlanned struct {
	rebasePlan
	merged bool
}

// merge3 merges the stage's and the workspace's changes to pl's path
// three-way from the content the stage's changes started from; lines both
// changed are written between conflict markers.
func (rb *rebaser) merge3(ctx context.Context, pl *rebasePlanned, touching []TxOp, theirs []byte, trial bool) (*rebasePlanned, *Conflict, error) {
	p := pl.path
	c := findTreeChange(rb.cs.changes, p)
	orig := originalDigest(touching, p, c)
	if c == nil || c.Old == nil || c.New == nil || c.Old.Type != tree.File || c.New.Type != tree.File || orig == "" || !rb.s.ws.blobs.Has(blob.Digest(orig)) {
		return nil, &Conflict{Path: p, Kind: "rebase", Detail: "no three-way merge: the original content is not known or the path is not a file on both sides"}, nil
	}
	base, err := rb.s.ws.blobs.ReadAll(blob.Digest(orig))
	if err != nil {
		return nil, nil, AsError(err)
	}
	_, ours, err := stagedFile(rb.v, p)
	if err != nil {
		return nil, nil, err
	}
	if textdiff.IsBinary(base) || textdiff.IsBinary(ours) || textdiff.IsBinary(theirs) {
		return nil, &Conflict{Path: p, Kind: "rebase", Detail: "binary file: no three-way merge"}, nil
	}
	merged, conflicts := textdiff.Merge3Marked(base, ours, theirs,
		textdiff.Labels{Ours: markerLabels.ours, Base: markerLabels.base, Theirs: markerLabels.theirs})
	if len(conflicts) > 0 && failpoint.Disabled("conflict-markers") {
		return nil, &Conflict{Path: p, Kind: "rebase",
			Detail: fmt.Sprintf("the stage and the workspace changed the same lines (base lines %d-%d)", conflicts[0].Start, conflicts[0].End)}, nil
	}
	pl.content, pl.merged = merged, true
	if len(conflicts) > 0 {
		// The stage's side is kept for Resolve (the workspace's was kept
		// by planPath).
		if !trial {
			if _, err := rb.s.ws.blobs.PutBytes(ctx, ours); err != nil {
				return nil, nil, AsError(err)
			}
		}
		pl.mark = &ConflictMark{Path: []byte(p), Ours: string(blob.Sum(ours)), Theirs: pl.cur}
	}
	return pl, nil, nil
}

// refusal is the error of a rebase that cannot carry every drifted path.
// It offers a rebase with merge only when trying one carries them all.
func (rb *rebaser) refusal(ctx context.Context, merge bool, failures []Conflict) error {
	id := rb.s.ID()
	repairs := []Repair{{Action: "drop", Detail: "drop the stage and redo the work on the current workspace", Command: "wtx drop " + id}}
	if !merge {
		if _, res, more, err := rb.plan(ctx, true, true); err == nil && len(more) == 0 {
			detail := "merge the drifted files three-way (tried: it succeeds)"
			if n := len(res.Conflicted); n > 0 {
				detail = fmt.Sprintf("merge the drifted files three-way (tried: %d path(s) get conflict markers to resolve)", n)
			}
			repairs = append([]Repair{{Action: "merge", Detail: detail, Command: "wtx rebase " + id + " --merge"}}, repairs...)
		}
	}
	repairs = append(repairs, Repair{Action: RepairReview, Detail: "see which paths drifted and how", Stage: id, Command: "wtx status " + id})
	return &Error{Code: CodeTargetChanged,
		Message:   fmt.Sprintf("rebase of %s cannot carry %d drifted path(s); the stage is unchanged; first: %s (%s)", id, len(failures), quote.Path(failures[0].Path), failures[0].Detail),
		Conflicts: failures, Repairs: repairs}
}

// write carries the plans out: it marks the paths (before the view
// changes, so that no kill leaves a moved path unmarked), writes the new
// contents and moves their base.
func (rb *rebaser) write(ctx context.Context, fo stage.FileOps, plans []rebasePlan) error {
	paths := make([]string, len(plans))
	var marks []ConflictMark
	for i := range plans {
		paths[i] = plans[i].path
		if plans[i].mark != nil {
			marks = append(marks, *plans[i].mark)
		}
	}
	if err := rb.s.markRebased(ctx, rb.ops, paths, marks); err != nil {
		return err
	}
	m := rb.cs.base
	for _, pl := range plans {
		if err := fo.WriteFile(ctx, pl.path, pl.content, fsFileMode(pl.perm)); err != nil {
			return rb.s.fileOpError(pl.path, err)
		}
		st, err := rb.root.Lstat(pl.path)
		if err != nil {
			return AsError(err)
		}
		e := tree.Entry{Path: pl.path, Type: tree.File, Perm: uint32(st.Mode.Perm()), Size: st.Size, Digest: pl.cur,
			WS: tree.Stat{Ino: st.Ino, Dev: st.Dev, Size: st.Size, Mtime: st.Mtime, Ctime: st.Ctime}}
		if old := m.Lookup(pl.path); old != nil {
			e.View = old.View
			*old = e
		} else {
			m.Entries = append(m.Entries, e)
		}
	}
	tree.SortEntries(m.Entries)
	return AsErrorOrNil(rb.s.ws.writeManifest(rb.s.ID(), m))
}

// markRebased records that a rebase moves the base of paths after the
// stage's last op (RebaseMark), and which of them it leaves conflicted (a
// later mark of a path replaces an earlier one).
func (s *Stage) markRebased(ctx context.Context, ops []TxOp, paths []string, marks []ConflictMark) error {
	last := 0
	if len(ops) > 0 {
		last = ops[len(ops)-1].Seq
	}
	for _, p := range paths {
		s.cfg.Rebased = append(s.cfg.Rebased, RebaseMark{Path: []byte(p), AfterOp: last})
	}
	for _, m := range marks {
		s.cfg.Conflicted = slices.DeleteFunc(s.cfg.Conflicted, func(c ConflictMark) bool { return bytes.Equal(c.Path, m.Path) })
		s.cfg.Conflicted = append(s.cfg.Conflicted, m)
	}
	return s.saveConfig(ctx)
}

func findTreeChange(cs []tree.Change, p string) *tree.Change {
	for i := range cs {
		if cs[i].Path == p {
			return &cs[i]
		}
	}
	return nil
}

// readWorkspaceFile reads the workspace file rel and checks it has digest
// want (it was just hashed).
func (w *Workspace) readWorkspaceFile(root *fsx.Root, rel, want string) ([]byte, error) {
	d, err := root.OpenDir(tree.Parent(rel))
	if err != nil {
		return nil, AsError(err)
	}
	defer d.Close()
	f, err := d.OpenFile(tree.Base(rel))
	if err != nil {
		return nil, AsError(err)
	}
	defer f.Close()
	data, err := readAllLimit(f)
	if err != nil {
		return nil, err
	}
	if string(blob.Sum(data)) != want {
		return nil, &Error{Code: CodeUnstable, Message: fmt.Sprintf("%s changed while it was read; try again", rel)}
	}
	return data, nil
}

// originalDigest is the content the stage's changes to p started from: what
// the first op that touched p found there (its pre-image is kept as a
// blob), else the path's base digest (unknown on lazy backends once the
// workspace copy moved).
func originalDigest(ops []TxOp, p string, c *tree.Change) string {
	for _, op := range ops {
		for _, f := range op.Files {
			if f.Path == p && f.Before != nil && f.Before.Type == "file" {
				return f.Before.Digest
			}
		}
	}
	if c != nil && c.Old != nil {
		return c.Old.Digest
	}
	return ""
}

// rerunEdits re-runs the content-based edits ops made to p on content; the
// failure names the first that no longer applies.
func rerunEdits(p string, content []byte, ops []TxOp) ([]byte, *Conflict) {
	for _, op := range ops {
		next, err := applyEdit(p, content, op.Old, op.New, op.All)
		if err != nil {
			return nil, &Conflict{Path: p, Kind: "rebase", Detail: fmt.Sprintf("op %d no longer applies: %v", op.Seq, err)}
		}
		content = next
	}
	return content, nil
}
