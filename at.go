package wtx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/wtx-dev/wtx/internal/binenc"
	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/stage"
	"github.com/wtx-dev/wtx/internal/tree"
)

// A stage opened at a past op (BeginOptions.At) has the view and the base
// of the workspace as it was right after that op, as far as the ops know:
// every path that a later op wrote holds what it held before the first of
// those later ops (the op's recorded pre-image, read back from the blob
// store and checked against its digest). Paths no later op wrote are the
// workspace's as they are now; a change made outside wtx is not recorded
// anywhere and cannot be set back.
//
// Its base being the state after the op, applying such a stage is an
// ordinary apply against the current workspace: what the stage changed on
// a path that no later op wrote lands as usual; a path that a later op
// wrote and the stage changed again has drifted (the workspace no longer
// holds the base), so the apply is refused as refusal.target-changed and
// rebase --merge merges it three-way, the state after the op being the
// known original. A path set back that the stage leaves alone is not part
// of its change set: applying never undoes a later op (wtx undo does).

// reversal is what a stage opened at a past op sets back.
type reversal struct {
	op    *Op
	later []*Op
	// at is, for every path a later op wrote, its entry right after op
	// (nil: absent); by is the first later op that wrote it.
	at map[string]*tree.Entry
	by map[string]string
}

// stateAfter finds op ref and what every later op of the workspace changed.
// The caller holds the workspace lock, so no op is added meanwhile.
func (w *Workspace) stateAfter(ctx context.Context, ref string) (*reversal, error) {
	op, err := w.Op(ctx, ref)
	if err != nil {
		return nil, err
	}
	ops, err := w.Ops(ctx)
	if err != nil {
		return nil, err
	}
	r := &reversal{op: op, at: map[string]*tree.Entry{}, by: map[string]string{}}
	i := 0
	for i < len(ops) && ops[i].ID != op.ID {
		i++
	}
	if i == len(ops) {
		return nil, errorf(CodeOpNotFound, "no op %q in workspace %s (see 'wtx log')", ref, w.path)
	}
	r.later = ops[i+1:]
	for _, l := range r.later {
		for _, c := range l.body.Changes {
			if _, seen := r.at[c.Path]; seen {
				continue
			}
			r.at[c.Path] = fromEntryJSON(c.Path, c.Old)
			r.by[c.Path] = l.ID
		}
	}
	return r, nil
}

// checkPreImages makes sure every file content the reversal needs is in the
// blob store and still hashes to its digest.
func (w *Workspace) checkPreImages(r *reversal, paths []string) error {
	for _, p := range paths {
		e := r.at[p]
		if e == nil || e.Type != tree.File {
			continue
		}
		err := w.blobs.Verify(blob.Digest(e.Digest))
		switch {
		case err == nil:
		case errors.Is(err, blob.ErrMissing):
			return &Error{Code: CodeStateLost, Err: err,
				Message: fmt.Sprintf("the state right after %s cannot be rebuilt: what %s held before %s (%s) is no longer in the blob store (gc with history pruning removes it)",
					r.op.ID, quote.Path(p), r.by[p], e.Digest)}
		case errors.Is(err, blob.ErrCorrupt):
			return &Error{Code: CodeCorrupt, Err: err,
				Message: fmt.Sprintf("the state right after %s cannot be rebuilt: what %s held before %s (%s) is damaged in the blob store", r.op.ID, quote.Path(p), r.by[p], e.Digest),
				Repairs: []Repair{{Action: "fsck", Detail: "check the state root", Command: "wtx fsck"}}}
		default:
			return AsError(err)
		}
	}
	return nil
}

// setBack turns the freshly staged view and base manifest m (the workspace
// now) into the state right after r.op, leaving out the paths a stage
// selector keeps out of the view. It returns the paths set back.
func (w *Workspace) setBack(ctx context.Context, v stage.View, m *tree.Manifest, r *reversal, out tree.Selectors) ([]string, error) {
	var paths []string
	for p := range r.at {
		if failpoint.Disabled("at-setback") {
			break // negative control: the view stays the workspace as it is now
		}
		if out.Match(p) {
			continue
		}
		paths = append(paths, p)
	}
	sort.Strings(paths)
	if err := w.checkPreImages(r, paths); err != nil {
		return nil, err
	}
	// The tree after the change: a directory a later op made keeps being
	// one while something no op wrote is still in it.
	want := make(map[string]*tree.Entry, len(paths))
	for _, p := range paths {
		want[p] = r.at[p]
	}
	kept := map[string]bool{}
	remaining := func(dir string) bool {
		prefix := dir + "/"
		i := sort.Search(len(m.Entries), func(i int) bool { return m.Entries[i].Path >= prefix })
		for ; i < len(m.Entries) && strings.HasPrefix(m.Entries[i].Path, prefix); i++ {
			p := m.Entries[i].Path
			if e, set := want[p]; !set || e != nil || kept[p] {
				return true
			}
		}
		for p, e := range want {
			if strings.HasPrefix(p, prefix) && e != nil {
				return true
			}
		}
		return false
	}
	for i := len(paths) - 1; i >= 0; i-- { // deepest first
		p := paths[i]
		if cur := m.Lookup(p); cur != nil && cur.Type == tree.Dir && (want[p] == nil || want[p].Type != tree.Dir) && remaining(p) {
			if want[p] != nil {
				return nil, &Error{Code: CodeTargetChanged,
					Message:   fmt.Sprintf("the state right after %s cannot be rebuilt: %s was a %s then, and is now a directory holding what no op wrote", r.op.ID, quote.Path(p), want[p].Type),
					Conflicts: []Conflict{{Path: p, Kind: "type-changed"}}}
			}
			kept[p] = true
		}
	}
	var changes []tree.Change
	var setBack []string
	for _, p := range paths {
		if kept[p] {
			continue
		}
		cur, nw := m.Lookup(p), want[p]
		if tree.SameContent(cur, nw) {
			continue
		}
		c := tree.Change{Path: p, Old: cur, New: nw}
		switch {
		case cur == nil:
			c.Action = tree.Added
		case nw == nil:
			c.Action = tree.Deleted
		default:
			c.Action = tree.Modified
		}
		changes = append(changes, c)
		setBack = append(setBack, p)
	}
	var steps []stage.RestoreStep
	for _, st := range tree.Plan(changes) {
		rs := stage.RestoreStep{Kind: st.Kind, Path: st.Path}
		if st.New != nil {
			rs.Perm, rs.Target, rs.Size = st.New.Perm, st.New.Target, st.New.Size
			if st.Kind == tree.StepWrite {
				d := blob.Digest(st.New.Digest)
				rs.Content = func() (io.ReadCloser, error) { return w.blobs.NewReader(d) }
			}
		}
		steps = append(steps, rs)
	}
	if err := stage.Restore(ctx, v, steps); err != nil {
		return nil, AsError(fmt.Errorf("set the view back to the state after %s: %w", r.op.ID, err))
	}
	next := make([]tree.Entry, 0, len(m.Entries)+len(changes))
	changed := make(map[string]*tree.Change, len(changes))
	for i := range changes {
		changed[changes[i].Path] = &changes[i]
	}
	for _, e := range m.Entries {
		if _, ok := changed[e.Path]; !ok {
			next = append(next, e)
		}
	}
	for _, c := range changes {
		if c.New == nil {
			continue
		}
		// No stat tuple: the workspace copy is compared by content, and
		// the view's copy is hashed when scanned.
		next = append(next, tree.Entry{Path: c.Path, Type: c.New.Type, Perm: c.New.Perm, Size: c.New.Size, Digest: c.New.Digest, Target: c.New.Target})
	}
	tree.SortEntries(next)
	m.Entries = next
	return setBack, nil
}

// reversedName is the file in a stage opened at a past op that lists the
// paths it set back (length-prefixed names: they are bytes).
const reversedName = "at.paths"

// writeReversed records paths as the paths stage id set back.
func (w *Workspace) writeReversed(id string, paths []string) error {
	var b []byte
	for _, p := range paths {
		b = binenc.AppendString(b, p)
	}
	return w.state.WriteFileAtomic(stageRel(id)+"/"+reversedName, b, 0o600)
}

// At is the op a stage was opened at ("" for a stage of the workspace as
// it was when it opened).
func (s *Stage) At() string { return s.cfg.At }

// Reversed lists the paths that a stage opened at a past op set back to
// their state right after that op (nil for any other stage).
func (s *Stage) Reversed() ([]string, error) {
	if s.cfg.At == "" {
		return nil, nil
	}
	data, err := s.ws.state.ReadFile(stageRel(s.ID()) + "/" + reversedName)
	if err != nil {
		return nil, stateIOError(s.ws.stateDir, "read the paths stage "+s.ID()+" set back", err)
	}
	d := binenc.NewDecoder(data)
	out := []string{}
	for d.Len() > 0 && d.Err() == nil {
		out = append(out, d.String())
	}
	if d.Err() != nil {
		return nil, &Error{Code: CodeCorrupt, Message: fmt.Sprintf("stage %s: the list of paths set back is damaged: %v", s.ID(), d.Err())}
	}
	return out, nil
}

// isReversed reports whether p is one of the paths the stage set back.
func (s *Stage) isReversed(p string) bool {
	if s.cfg.At == "" {
		return false
	}
	paths, err := s.Reversed()
	if err != nil {
		return true // unknown: leave the path as the stage has it
	}
	i := sort.SearchStrings(paths, p)
	return i < len(paths) && paths[i] == p
}
