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
	_, _, drift, err := newCASReader(root, cs.base).check(ctx, cs.changes)
	if err != nil {
		return nil, err
	}
	ops, err := s.TxOps(ctx)
	if err != nil {
		return nil, err
	}
	res := &RebaseResult{Rebased: []string{}, Merged: []string{}, Conflicted: []string{}}
	type plan struct {
		path    string
		content []byte
		perm    uint32
		cur     string // the workspace's current digest: the new base
		mark    *ConflictMark
	}
	var plans []plan
	var failures []Conflict
	for _, d := range drift {
		p := d.Path
		at, err := entryAt(ctx, root, p, engine.ContentReader{})
		if err != nil {
			return nil, err
		}
		if !at.Found() || at.Entry.Type != tree.File {
			failures = append(failures, Conflict{Path: p, Kind: d.Kind, Detail: "the workspace no longer holds a file there; nothing to re-run the edits on"})
			continue
		}
		cur := at.Entry.Digest
		theirs, err := s.ws.readWorkspaceFile(root, p, cur)
		if err != nil {
			return nil, err
		}
		// Kept: after the rebase it is the path's base, the original a later
		// merge needs.
		if !trial {
			if _, err := s.ws.blobs.PutBytes(ctx, theirs); err != nil {
				return nil, AsError(err)
			}
		}
		var touching []TxOp
		rerunnable := true
		for _, op := range ops {
			for _, f := range op.Files {
				if f.Path == p && op.Kind != "read" {
					touching = append(touching, op)
					if op.Kind != "edit" || op.ExpectHash != "" {
						rerunnable = false
					}
				}
			}
		}
		// A run that kept no checkpoint may have changed the path too
		// without saying so: only a merge can carry it. A checkpointed run
		// that changed it is among touching, and is no edit to re-run.
		for _, op := range ops {
			if op.Kind == "run" && !op.Checkpoint {
				rerunnable = false
			}
		}
		perm := uint32(0o644)
		if c := findTreeChange(cs.changes, p); c != nil && c.New != nil {
			perm = c.New.Perm
		}
		if len(touching) > 0 && rerunnable {
			content, failure := rerunEdits(p, theirs, touching)
			switch {
			case failure == nil:
				plans = append(plans, plan{path: p, content: content, perm: perm, cur: cur})
				res.Rebased = append(res.Rebased, p)
				continue
			case !merge:
				failures = append(failures, *failure)
				continue
			}
			// An edit that no longer applies is merged three-way instead.
		}
		if !merge {
			why := "its ops are not all content-based edits (a whole write, a removal, an expected hash or a command run)"
			failures = append(failures, Conflict{Path: p, Kind: "rebase", Detail: why})
			continue
		}
		c := findTreeChange(cs.changes, p)
		orig := originalDigest(touching, p, c)
		if c == nil || c.Old == nil || c.New == nil || c.Old.Type != tree.File || c.New.Type != tree.File || orig == "" || !s.ws.blobs.Has(blob.Digest(orig)) {
			failures = append(failures, Conflict{Path: p, Kind: "rebase", Detail: "no three-way merge: the original content is not known or the path is not a file on both sides"})
			continue
		}
		base, err := s.ws.blobs.ReadAll(blob.Digest(orig))
		if err != nil {
			return nil, AsError(err)
		}
		_, ours, err := stagedFile(v, p)
		if err != nil {
			return nil, err
		}
		if textdiff.IsBinary(base) || textdiff.IsBinary(ours) || textdiff.IsBinary(theirs) {
			failures = append(failures, Conflict{Path: p, Kind: "rebase", Detail: "binary file: no three-way merge"})
			continue
		}
		merged, conflicts := textdiff.Merge3Marked(base, ours, theirs,
			textdiff.Labels{Ours: markerLabels.ours, Base: markerLabels.base, Theirs: markerLabels.theirs})
		if len(conflicts) > 0 && failpoint.Disabled("conflict-markers") {
			failures = append(failures, Conflict{Path: p, Kind: "rebase",
				Detail: fmt.Sprintf("the stage and the workspace changed the same lines (base lines %d-%d)", conflicts[0].Start, conflicts[0].End)})
			continue
		}
		pl := plan{path: p, content: merged, perm: perm, cur: cur}
		if len(conflicts) > 0 {
			// The stage's side is kept for Resolve (the workspace's was
			// kept above).
			if !trial {
				if _, err := s.ws.blobs.PutBytes(ctx, ours); err != nil {
					return nil, AsError(err)
				}
			}
			pl.mark = &ConflictMark{Path: []byte(p), Ours: string(blob.Sum(ours)), Theirs: cur}
			res.Conflicted = append(res.Conflicted, p)
		}
		plans = append(plans, pl)
		res.Merged = append(res.Merged, p)
	}
	if len(failures) > 0 {
		repairs := []Repair{{Action: "drop", Detail: "drop the stage and redo the work on the current workspace", Command: "wtx drop " + s.ID()}}
		if !merge {
			repairs = append([]Repair{{Action: "merge", Detail: "merge the drifted files three-way where their original is known", Command: "wtx rebase " + s.ID() + " --merge"}}, repairs...)
		}
		return nil, &Error{Code: CodeTargetChanged,
			Message:   fmt.Sprintf("rebase of %s cannot carry %d drifted path(s); the stage is unchanged; first: %s (%s)", s.ID(), len(failures), quote.Path(failures[0].Path), failures[0].Detail),
			Conflicts: failures, Repairs: repairs}
	}
	if len(plans) == 0 || trial {
		sort.Strings(res.Rebased)
		sort.Strings(res.Merged)
		sort.Strings(res.Conflicted)
		return res, nil
	}
	// Every path could be carried: mark them (before the view changes,
	// so that no kill leaves a moved path unmarked), write the new
	// contents and move their base.
	paths := make([]string, len(plans))
	var marks []ConflictMark
	for i := range plans {
		paths[i] = plans[i].path
		if plans[i].mark != nil {
			marks = append(marks, *plans[i].mark)
		}
	}
	if err := s.markRebased(ctx, ops, paths, marks); err != nil {
		return nil, err
	}
	m := cs.base
	for _, pl := range plans {
		if err := fo.WriteFile(ctx, pl.path, pl.content, fsFileMode(pl.perm)); err != nil {
			return nil, s.fileOpError(pl.path, err)
		}
		st, err := root.Lstat(pl.path)
		if err != nil {
			return nil, AsError(err)
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
	if err := s.ws.writeManifest(s.ID(), m); err != nil {
		return nil, AsError(err)
	}
	sort.Strings(res.Rebased)
	sort.Strings(res.Merged)
	sort.Strings(res.Conflicted)
	return res, nil
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
