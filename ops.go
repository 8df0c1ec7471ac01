package wtx

import (
	"context"
	"fmt"
	"github.com/wtx-dev/wtx/internal/jsonname"
	"io"
	"strings"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/state"
	"github.com/wtx-dev/wtx/internal/textdiff"
	"github.com/wtx-dev/wtx/internal/tree"
)

// Ops lists the workspace's ops, oldest first.
func (w *Workspace) Ops(ctx context.Context) ([]*Op, error) {
	rows, err := w.db.ListOps(ctx, w.id)
	if err != nil {
		return nil, AsError(err)
	}
	return w.opsOf(rows)
}

// opsOf decodes rows, oldest first, and works out which of their paths
// their undos took back. rows must hold every undo of each op they hold
// (and so on down the chain): an op's state depends on those alone.
func (w *Workspace) opsOf(rows []state.Op) ([]*Op, error) {
	var out []*Op
	byID := map[string]*Op{}
	for _, r := range rows {
		op, err := w.opFromRow(r)
		if err != nil {
			return nil, err
		}
		byID[op.ID] = op
		out = append(out, op)
	}
	// Which paths of an op are taken back. An undo claims the paths it
	// changed, and the paths its selection names that no earlier undo of
	// the same op changed (those already held what they held before). An
	// undo that was itself undone, for a path, no longer takes that path
	// back: the path holds what the op wrote again, and the op is live for
	// it (as jj's undo of an undo). Newest first, so an undo's own undos
	// are counted before it is.
	undos := map[string][]*Op{} // target id → its undos, oldest first
	for _, u := range out {
		if byID[u.Undoes] != nil {
			undos[u.Undoes] = append(undos[u.Undoes], u)
		}
	}
	for i := len(out) - 1; i >= 0; i-- {
		u := out[i]
		target := byID[u.Undoes]
		if target == nil {
			continue
		}
		earlier := map[string]bool{}
		for _, e := range undos[target.ID] {
			if e == u {
				break
			}
			for _, c := range e.body.Changes {
				earlier[c.Path] = true
			}
		}
		claims := map[string]bool{}
		for _, c := range u.body.Changes {
			claims[c.Path] = true
		}
		for _, c := range undoSelection(target, u.body.Paths, u.body.Exclude) {
			if !earlier[c.Path] {
				claims[c.Path] = true
			}
		}
		took := false
		for _, c := range target.inverse() {
			if _, back := u.takenBack[c.Path]; !claims[c.Path] || back {
				continue
			}
			took = true
			if target.takenBack == nil {
				target.takenBack = map[string]string{}
			}
			if _, ok := target.takenBack[c.Path]; !ok { // the newest undo in effect
				target.takenBack[c.Path] = u.ID
			}
		}
		if took {
			target.PartlyUndoneBy = append([]string{u.ID}, target.PartlyUndoneBy...)
		}
	}
	for _, op := range out {
		// Undone, by the newest undo in effect, once every path it changed
		// was taken back.
		if n := len(op.PartlyUndoneBy); n > 0 && len(op.takenBack) >= len(op.body.Changes) {
			op.UndoneBy = op.PartlyUndoneBy[n-1]
			op.PartlyUndoneBy = nil
		}
	}
	return out, nil
}

// MarshalJSON writes the op with byte-safe paths.
func (op Op) MarshalJSON() ([]byte, error) { return jsonname.Marshal(op) }

// inverse returns the changes that take back what op wrote, sorted.
func (op *Op) inverse() []tree.Change {
	var inverse []tree.Change
	for _, c := range op.body.Changes {
		tc := c.change()
		inv := tree.Change{Path: tc.Path, Old: tc.New, New: tc.Old}
		switch {
		case inv.Old == nil:
			inv.Action = tree.Added
		case inv.New == nil:
			inv.Action = tree.Deleted
		default:
			inv.Action = tree.Modified
		}
		inverse = append(inverse, inv)
	}
	tree.SortChanges(inverse)
	return inverse
}

// undoSelection is the part of op's inverse that an undo with paths takes
// back (all of it without paths). An added directory above a selected path
// comes along, as in an apply.
func undoSelection(op *Op, paths, exclude []string) []tree.Change {
	sels, err := tree.ParseSelectors(paths)
	if err != nil {
		return nil
	}
	excl, err := tree.ParseSelectors(exclude)
	if err != nil {
		return nil
	}
	return excludeChanges(tree.Select(op.inverse(), sels), excl)
}

// Op finds an op by id or unique prefix. Only the op and the chain of its
// undos are read: the cost does not grow with the workspace's history.
func (w *Workspace) Op(ctx context.Context, ref string) (*Op, error) {
	op, _, err := w.findOp(ctx, ref)
	return op, err
}

// LatestOp returns the workspace's newest op or, with undoable, its newest
// apply not wholly undone yet: what an undo takes when it names no op, so
// that a second undo walks further back rather than redoing. Like Op it
// reads only the ops it looks at and their undo chains, whatever the
// length of the history. With none, the error is CodeOpNotFound.
func (w *Workspace) LatestOp(ctx context.Context, undoable bool) (*Op, error) {
	links, err := w.db.ListOpLinks(ctx, w.id)
	if err != nil {
		return nil, AsError(err)
	}
	return w.latestAmong(ctx, links, undoable)
}

// latestAmong is LatestOp among links.
func (w *Workspace) latestAmong(ctx context.Context, links []state.OpLink, undoable bool) (*Op, error) {
	if undoable {
		id, op, err := w.newestLiveApply(ctx, links)
		if err != nil || op != nil {
			return op, err
		}
		return w.opAmong(ctx, id, links)
	}
	if len(links) == 0 {
		return nil, errorf(CodeOpNotFound, "workspace %s has no op", quote.Path(w.path))
	}
	return w.opAmong(ctx, links[len(links)-1].ID, links)
}

// newestLiveApply finds among links the newest apply not wholly undone
// yet. An apply no undo names is live without reading its record: then
// only its id comes back, and op is nil. One an undo names is read (only
// the records say whether the undos took back all of its paths), and
// comes back as op when it is live. With none, the error is
// CodeOpNotFound.
func (w *Workspace) newestLiveApply(ctx context.Context, links []state.OpLink) (id string, op *Op, err error) {
	named := map[string]bool{}
	for _, l := range links {
		if l.Undoes != "" {
			named[l.Undoes] = true
		}
	}
	for i := len(links) - 1; i >= 0; i-- {
		l := links[i]
		if l.Kind != state.OpApply {
			continue
		}
		if !named[l.ID] {
			return l.ID, nil, nil
		}
		op, err := w.opAmong(ctx, l.ID, links)
		if err != nil {
			return "", nil, err
		}
		if op.UndoneBy == "" {
			return l.ID, op, nil
		}
	}
	return "", nil, errorf(CodeOpNotFound, "workspace %s has no applied op that is not undone yet", quote.Path(w.path))
}

// findOp is Op, with the list of every op's links it was found among: the
// same list later means the same answer.
func (w *Workspace) findOp(ctx context.Context, ref string) (*Op, []state.OpLink, error) {
	links, err := w.db.ListOpLinks(ctx, w.id)
	if err != nil {
		return nil, nil, AsError(err)
	}
	op, err := w.opAmong(ctx, ref, links)
	return op, links, err
}

// opAmong finds op ref among links and reads it and the chain of its undos.
func (w *Workspace) opAmong(ctx context.Context, ref string, links []state.OpLink) (*Op, error) {
	var found []string
	for _, l := range links {
		if l.ID == ref {
			found = []string{l.ID}
			break
		}
		if ref != "" && strings.HasPrefix(l.ID, ref) {
			found = append(found, l.ID)
		}
	}
	switch len(found) {
	case 0:
		return nil, errorf(CodeOpNotFound, "no op %q in workspace %s (see 'wtx log')", ref, w.path)
	case 1:
	default:
		return nil, errorf(CodeAmbiguousStage, "%q matches several ops: %s", ref, strings.Join(found, ", "))
	}
	// The op and every op whose undo chain leads to it, oldest first.
	undoneBy := map[string][]string{}
	for _, l := range links {
		if l.Undoes != "" {
			undoneBy[l.Undoes] = append(undoneBy[l.Undoes], l.ID)
		}
	}
	need := map[string]bool{found[0]: true}
	for queue := []string{found[0]}; len(queue) > 0; queue = queue[1:] {
		for _, u := range undoneBy[queue[0]] {
			if !need[u] {
				need[u] = true
				queue = append(queue, u)
			}
		}
	}
	var rows []state.Op
	for _, l := range links {
		if !need[l.ID] {
			continue
		}
		row, err := w.db.GetOp(ctx, l.ID)
		if err != nil {
			return nil, AsError(err)
		}
		rows = append(rows, row)
	}
	ops, err := w.opsOf(rows)
	if err != nil {
		return nil, err
	}
	for _, op := range ops {
		if op.ID == found[0] {
			return op, nil
		}
	}
	return nil, errorf(CodeOpNotFound, "no op %q in workspace %s (see 'wtx log')", ref, w.path)
}

// WriteDiff renders the op as a git-style diff from what it replaced to what
// it wrote.
func (op *Op) WriteDiff(w io.Writer, color bool) error {
	out := io.Writer(w)
	cw := textdiff.NewColorWriter(w, color)
	if color {
		out = cw
	}
	for _, c := range op.body.Changes {
		tc := c.change()
		fd := textdiff.FileDiff{Path: c.Path, OldMode: gitMode(tc.Old), NewMode: gitMode(tc.New)}
		if fd.OldMode == 0 && fd.NewMode == 0 {
			continue
		}
		var err error
		if fd.Old, err = op.workspace.content(tc.Old); err != nil {
			return err
		}
		if fd.New, err = op.workspace.content(tc.New); err != nil {
			return err
		}
		if err := textdiff.WriteGitOptions(out, fd, textdiff.Options{Context: 3, Binary: true}); err != nil {
			return err
		}
	}
	if color {
		return cw.Flush()
	}
	return nil
}

// content returns a file's content from the blob store or a symlink's target.
func (w *Workspace) content(e *tree.Entry) ([]byte, error) {
	if e == nil {
		return nil, nil
	}
	switch e.Type {
	case tree.Symlink:
		return []byte(e.Target), nil
	case tree.File:
		data, err := w.blobs.ReadAll(blob.Digest(e.Digest))
		if err != nil {
			return nil, AsError(fmt.Errorf("content %s of %s: %w", e.Digest, e.Path, err))
		}
		return data, nil
	}
	return nil, nil
}
