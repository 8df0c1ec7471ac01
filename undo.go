package wtx

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/state"
	"github.com/wtx-dev/wtx/internal/textdiff"
	"github.com/wtx-dev/wtx/internal/tree"
)

// Op is one applied batch as the journal of ops records it.
type Op struct {
	ID       string    `json:"op_id"`
	Kind     string    `json:"kind"` // "apply" or "undo"
	Tx       string    `json:"tx"`
	Created  time.Time `json:"created"`
	Written  []string  `json:"written"`
	Changes  []Change  `json:"changes"`
	Undoes   string    `json:"undoes,omitempty"`
	UndoneBy string    `json:"undone_by,omitempty"`
	// PartlyUndoneBy names the undos that took back part of the op (undo
	// with paths), while some of its paths are still as it wrote them.
	PartlyUndoneBy []string `json:"partly_undone_by,omitempty"`
	body           opBody
	workspace      *Workspace
}

func (w *Workspace) opFromRow(o state.Op) (*Op, error) {
	var b opBody
	if err := json.Unmarshal(o.Body, &b); err != nil {
		return nil, &Error{Code: CodeInternal, Message: fmt.Sprintf("op %s: damaged record: %v", o.ID, err)}
	}
	op := &Op{ID: o.ID, Kind: o.Kind, Tx: o.StageID, Created: o.CreatedAt, Written: nonNil(b.Written), Undoes: b.Undoes, body: b, workspace: w}
	for _, c := range b.Changes {
		tc := c.change()
		op.Changes = append(op.Changes, publicChange(&tc))
	}
	op.Changes = nonNil(op.Changes)
	return op, nil
}

func (c opChange) change() tree.Change {
	tc := tree.Change{Path: c.Path, Old: fromEntryJSON(c.Path, c.Old), New: fromEntryJSON(c.Path, c.New)}
	switch {
	case tc.Old == nil:
		tc.Action = tree.Added
	case tc.New == nil:
		tc.Action = tree.Deleted
	default:
		tc.Action = tree.Modified
	}
	return tc
}

// Ops lists the workspace's ops, oldest first.
func (w *Workspace) Ops(ctx context.Context) ([]*Op, error) {
	rows, err := w.db.ListOps(ctx, w.id)
	if err != nil {
		return nil, AsError(err)
	}
	var out []*Op
	byID := map[string]*Op{}
	covered := map[string]map[string]bool{}
	for _, r := range rows {
		op, err := w.opFromRow(r)
		if err != nil {
			return nil, err
		}
		byID[op.ID] = op
		out = append(out, op)
		target := byID[op.Undoes]
		if target == nil {
			continue
		}
		// An undo with paths took back only what they select; the op is
		// undone once every path it wrote has been taken back.
		if covered[target.ID] == nil {
			covered[target.ID] = map[string]bool{}
		}
		for _, c := range undoSelection(target, op.body.Paths, op.body.Exclude) {
			covered[target.ID][c.Path] = true
		}
		target.PartlyUndoneBy = append(target.PartlyUndoneBy, op.ID)
		if (len(op.body.Paths) == 0 && len(op.body.Exclude) == 0) || len(covered[target.ID]) >= len(target.body.Changes) {
			target.UndoneBy = op.ID
		}
	}
	for _, op := range out {
		if op.UndoneBy != "" {
			op.PartlyUndoneBy = nil
		}
	}
	return out, nil
}

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

// Op finds an op by id or unique prefix.
func (w *Workspace) Op(ctx context.Context, ref string) (*Op, error) {
	ops, err := w.Ops(ctx)
	if err != nil {
		return nil, err
	}
	var found []*Op
	for _, op := range ops {
		if op.ID == ref {
			return op, nil
		}
		if ref != "" && strings.HasPrefix(op.ID, ref) {
			found = append(found, op)
		}
	}
	switch len(found) {
	case 0:
		return nil, errorf(CodeOpNotFound, "no op %q in workspace %s (see 'wtx log')", ref, w.path)
	case 1:
		return found[0], nil
	}
	ids := make([]string, len(found))
	for i, op := range found {
		ids[i] = op.ID
	}
	return nil, errorf(CodeAmbiguousStage, "%q matches several ops: %s", ref, strings.Join(ids, ", "))
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

// UndoResult reports an undo.
type UndoResult struct {
	OpID    string
	Undoes  string
	Written []string
	Receipt *Receipt
}

// UndoOptions select what an undo takes back.
type UndoOptions struct {
	// Paths are selectors: only the paths of the op they select are taken
	// back (all of them when empty). Each must select a path of the op.
	Paths []string
	// Exclude selectors leave paths of the op as they are; each must
	// select a path of the op.
	Exclude []string
}

// Undo reverses op ref as a new op: every path it wrote gets back what it
// held before, through the same journaled protocol as an apply. It refuses
// without effect (refusal.target-changed) if any of those paths changed
// since the op wrote it; each such conflict names the later op that wrote
// the path, when one did.
func (w *Workspace) Undo(ctx context.Context, ref string) (*UndoResult, error) {
	return w.UndoWith(ctx, ref, UndoOptions{})
}

// UndoWith is Undo of the part of op ref that opts selects: all or nothing
// for the selected paths, with the same checks, recorded as its own op with
// its own receipt. Paths an earlier partial undo took back are left out; an
// op whose paths have all been taken back is undone.
func (w *Workspace) UndoWith(ctx context.Context, ref string, opts UndoOptions) (*UndoResult, error) {
	sels, err := parsePaths(opts.Paths)
	if err != nil {
		return nil, err
	}
	excl, err := parseExcludes(opts.Exclude)
	if err != nil {
		return nil, err
	}
	op, err := w.Op(ctx, ref)
	if err != nil {
		return nil, err
	}
	unlock, err := w.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if op, err = w.Op(ctx, op.ID); err != nil { // re-read under the lock
		return nil, err
	}
	if op.UndoneBy != "" {
		return nil, &Error{Code: CodeAlreadyUndone, Message: fmt.Sprintf("op %s was already undone by %s", op.ID, op.UndoneBy)}
	}
	inverse, err := w.undoChanges(ctx, op, sels, excl)
	if err != nil {
		return nil, err
	}
	for _, inv := range inverse {
		if inv.New != nil && inv.New.Type == tree.File && !w.blobs.Has(blob.Digest(inv.New.Digest)) {
			return nil, &Error{Code: CodeStateLost, Message: fmt.Sprintf("op %s: the content %s of %s is no longer in the blob store", op.ID, inv.New.Digest, quote.Path(inv.Path))}
		}
	}
	root, err := fsx.OpenRoot(w.path)
	if err != nil {
		return nil, AsError(err)
	}
	defer root.Close()
	a := &applier{ws: w, root: root, base: &tree.Manifest{}, ident: map[string]fsx.Stat{}}
	todo, _, conflicts, err := a.check(ctx, inverse)
	if err != nil {
		return nil, err
	}
	if len(conflicts) > 0 {
		return nil, w.undoRefusal(ctx, op, inverse, conflicts)
	}
	res := &UndoResult{Undoes: op.ID}
	for _, c := range todo {
		res.Written = append(res.Written, c.Path)
	}
	res.Written = nonNil(res.Written)
	if len(todo) == 0 {
		return res, nil
	}
	opID := newID("op", w.now())
	body, err := json.Marshal(opBody{Stage: op.Tx, Paths: nonNil(opts.Paths), Exclude: opts.Exclude, Written: res.Written, ChangesetDigest: tree.ChangesetDigest(todo), Changes: opChanges(todo), Undoes: op.ID})
	if err != nil {
		return nil, AsError(err)
	}
	now := w.now().UTC()
	rc := Receipt{
		SchemaVersion: 1, ID: newID("rc", now), Kind: "undo", Workspace: w.path, Tx: op.Tx, OpID: opID,
		CreatedAt: now, Backend: "", Command: []string{"undo", op.ID}, Paths: append([]string{}, opts.Paths...),
		ChangesetDigest: tree.ChangesetDigest(todo), Counts: tree.Count(todo),
		NotTransactional: append([]string(nil), NotTransactional...),
	}
	rec := &opRecord{Op: state.Op{ID: opID, WorkspaceID: w.id, StageID: op.Tx, Kind: "undo", State: "committed", Body: body, CreatedAt: now}, Receipt: rc}
	if err := w.commitOp(ctx, a, rec, todo, nil); err != nil {
		return nil, err
	}
	res.OpID = opID
	res.Receipt = &rec.Receipt
	return res, nil
}

// VerifyReceipt checks a receipt's JSON: every field C-007 requires is
// present and its digest matches its content. It returns the receipt.
func VerifyReceipt(data []byte) (*Receipt, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, errorf(CodeReceiptInvalid, "not a receipt: %v", err)
	}
	if inner, ok := raw["receipt"]; ok { // a whole --json answer
		if err := json.Unmarshal(inner, &raw); err != nil {
			return nil, errorf(CodeReceiptInvalid, "not a receipt: %v", err)
		}
		data = inner
	}
	var missing []string
	for _, f := range receiptFields {
		if _, ok := raw[f]; !ok {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return nil, errorf(CodeReceiptInvalid, "receipt lacks %s", strings.Join(missing, ", "))
	}
	var rj receiptJSON
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rj); err != nil {
		return nil, errorf(CodeReceiptInvalid, "receipt does not parse: %v", err)
	}
	r, err := rj.receipt()
	if err != nil {
		return nil, errorf(CodeReceiptInvalid, "receipt does not parse: %v", err)
	}
	for _, d := range []struct{ name, v string }{{"base_digest", r.BaseDigest}, {"result_digest", r.ResultDigest}, {"changeset_digest", r.ChangesetDigest}} {
		if r.Kind != "undo" || d.name == "changeset_digest" {
			if _, err := blob.ParseDigest(d.v); err != nil {
				return nil, errorf(CodeReceiptInvalid, "receipt %s: %s is not a digest: %q", r.ID, d.name, d.v)
			}
		}
	}
	if got := r.ComputeDigest(); got != r.Digest {
		return nil, errorf(CodeReceiptInvalid, "receipt %s: digest mismatch: it says %s, its content gives %s", r.ID, r.Digest, got)
	}
	return &r, nil
}

// receiptFields are the JSON fields every receipt must carry.
var receiptFields = []string{"schema_version", "id", "kind", "workspace", "tx", "op_id", "created_at", "backend",
	"command", "exit_code", "base_digest", "result_digest", "changeset_digest", "counts", "paths", "refusal",
	"exclusions", "protections", "protected_paths", "approved", "not_transactional", "digest"}

// Receipt finds a receipt by op id (the op's receipt) or stage ref (the
// stage's latest receipt).
func (w *Workspace) Receipt(ctx context.Context, ref string) (*Receipt, error) {
	if strings.HasPrefix(ref, "op-") {
		op, err := w.Op(ctx, ref)
		if err != nil {
			return nil, err
		}
		s, err := w.Stage(ctx, op.Tx)
		if err != nil {
			return nil, err
		}
		rs, err := s.Receipts(ctx)
		if err != nil {
			return nil, err
		}
		for i := range rs {
			if rs[i].OpID == op.ID {
				return &rs[i], nil
			}
		}
		return nil, errorf(CodeOpNotFound, "op %s has no receipt", op.ID)
	}
	s, err := w.Stage(ctx, ref)
	if err != nil {
		return nil, err
	}
	if s.State() == StateOpen {
		// A run its killed wtx left unfinished gets its receipt now.
		if _, err := s.Running(ctx); err != nil {
			return nil, err
		}
	}
	rs, err := s.Receipts(ctx)
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, errorf(CodeStageNotFound, "stage %s has no receipt yet", s.ID())
	}
	return &rs[len(rs)-1], nil
}
