package wtx

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/stage"
	"github.com/wtx-dev/wtx/internal/state"
	"github.com/wtx-dev/wtx/internal/tree"
	"github.com/wtx-dev/wtx/receipt"
)

// Receipt is the durable record of a run, an apply, an undo or an export
// (package receipt has its fields, wire form, signing and verification).
type Receipt = receipt.Receipt

// Refusal is the refusal a receipt records.
type Refusal = receipt.Refusal

func (s *Stage) notTransactional() []string {
	out := append([]string(nil), receipt.NotTransactional...)
	for _, sh := range s.cfg.Share {
		out = append(out, receipt.SharedPath(sh))
	}
	if (s.row.Backend == "copy" || s.row.Backend == "clone") && !stage.CanConfineViews() {
		out = append(out, receipt.NotConfined)
	}
	return out
}

// markConfined makes a run receipt's not_transactional say whether its
// command ran confined to its view.
func markConfined(r *Receipt, confined bool) {
	r.NotTransactional = withoutItem(r.NotTransactional, receipt.NotConfined)
	if !confined {
		r.NotTransactional = append(r.NotTransactional, receipt.NotConfined)
	}
}

func (s *Stage) newReceipt(kind string, cs *ChangeSet) Receipt {
	r := Receipt{
		SchemaVersion:    1,
		ID:               newID("rc", s.ws.now()),
		Kind:             kind,
		Workspace:        s.ws.path,
		Tx:               s.ID(),
		CreatedAt:        s.ws.now().UTC(),
		Backend:          s.row.Backend,
		Command:          []string{},
		Paths:            []string{},
		Exclusions:       len(s.cfg.Exclude),
		Share:            append([]string(nil), s.cfg.Share...),
		Protections:      len(s.cfg.Protect),
		NotTransactional: s.notTransactional(),
	}
	if cs != nil {
		r.ChangesetDigest, r.Counts = cs.Digest, receipt.Counts(cs.Counts)
		r.LeftOut = len(cs.LeftOut)
		for _, l := range cs.LeftOut {
			r.LeftOutPaths = append(r.LeftOutPaths, l.Path)
		}
		if cs.base != nil {
			r.BaseDigest = tree.Digest(cs.base.Entries)
			r.ResultDigest = r.BaseDigest
		}
		r.ProtectedPaths = s.protectedCount(cs.changes)
	}
	return r
}

// viewDigest is the digest of the view cs was scanned from (special files
// left out: they are never applied). A view without special files, the
// usual one, is digested where it lies: a copy of a large tree's view costs
// more than its digest.
func viewDigest(cs *ChangeSet) string {
	special := slices.IndexFunc(cs.view, func(e tree.Entry) bool { return e.Type == tree.Special })
	if special < 0 {
		return tree.Digest(cs.view)
	}
	view := cs.view[:special:special] // full: the first append copies
	for _, e := range cs.view[special:] {
		if e.Type != tree.Special {
			view = append(view, e)
		}
	}
	return tree.Digest(view)
}

// protectedCount counts the protected paths among changes, the defaults
// (.git, the project file) included.
func (s *Stage) protectedCount(changes []tree.Change) int {
	if failpoint.Disabled("receipt-protected") {
		// Negative control: only protect selectors and the project file
		// count, as receipts once counted.
		n := 0
		for i := range changes {
			if s.protect.Match(changes[i].Path) || projectPath(changes[i].Path) {
				n++
			}
		}
		return n
	}
	return len(s.protection().writes(changes))
}

func (w *Workspace) storeReceipt(ctx context.Context, r *Receipt) error {
	r.Digest = r.ComputeDigest()
	body, err := w.receiptBody(*r)
	if err != nil {
		return AsError(err)
	}
	if err := w.db.InsertReceipt(ctx, state.Receipt{ID: r.ID, Kind: r.Kind, WorkspaceID: w.id, StageID: r.Tx, OpID: r.OpID, Body: body, CreatedAt: r.CreatedAt}); err != nil {
		return AsError(err)
	}
	return nil
}

// recordRefusal leaves a receipt for a refused apply; failing to write it
// does not hide the refusal.
func (w *Workspace) recordRefusal(ctx context.Context, s *Stage, cs *ChangeSet, opts ApplyOptions, e *Error) {
	r := s.newReceipt("apply", cs)
	who := s.applier(opts)
	r.Approved, r.Actor = approves(who, opts.Approve), who.String()
	r.Paths = append(r.Paths, opts.Paths...)
	r.Refusal = &Refusal{Code: e.Code, Message: e.Message}
	if err := w.storeReceipt(ctx, &r); err != nil {
		w.log.Warn("store refusal receipt", "tx", s.ID(), "err", err)
	}
}

// Receipts returns the stage's receipts, oldest first.
func (s *Stage) Receipts(ctx context.Context) ([]Receipt, error) {
	recs, err := s.ReceiptRecords(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Receipt, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.Receipt)
	}
	return out, nil
}

// ReceiptRecords returns the stage's receipts with their envelopes, oldest
// first: every run, checkpoint, apply, refusal and undo of the stage.
func (s *Stage) ReceiptRecords(ctx context.Context) ([]receipt.Record, error) {
	rows, err := s.ws.db.ReceiptsForStage(ctx, s.ID())
	if err != nil {
		return nil, AsError(err)
	}
	out := make([]receipt.Record, 0, len(rows))
	for _, row := range rows {
		rec, err := receipt.Decode(row.Body)
		if err != nil {
			return nil, &Error{Code: CodeInternal, Message: fmt.Sprintf("receipt %s is damaged: %v", row.ID, err)}
		}
		out = append(out, rec)
	}
	return out, nil
}

// Receipt finds a receipt by op id (the op's receipt) or stage ref (the
// stage's latest receipt).
func (w *Workspace) Receipt(ctx context.Context, ref string) (*Receipt, error) {
	rec, err := w.ReceiptRecord(ctx, ref)
	if err != nil {
		return nil, err
	}
	return &rec.Receipt, nil
}

// ReceiptRecordsOf returns every receipt of stage ref, oldest first.
func (w *Workspace) ReceiptRecordsOf(ctx context.Context, ref string) (string, []receipt.Record, error) {
	s, err := w.Stage(ctx, ref)
	if err != nil {
		return "", nil, err
	}
	if s.State() == StateOpen {
		if _, err := s.Running(ctx); err != nil {
			return "", nil, err
		}
	}
	rs, err := s.ReceiptRecords(ctx)
	return s.ID(), rs, err
}

// ReceiptRecord is Receipt with its envelope.
func (w *Workspace) ReceiptRecord(ctx context.Context, ref string) (*receipt.Record, error) {
	if strings.HasPrefix(ref, "op-") {
		op, err := w.Op(ctx, ref)
		if err != nil {
			return nil, err
		}
		s, err := w.Stage(ctx, op.Tx)
		if err != nil {
			return nil, err
		}
		rs, err := s.ReceiptRecords(ctx)
		if err != nil {
			return nil, err
		}
		for i := range rs {
			if rs[i].Receipt.OpID == op.ID {
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
	rs, err := s.ReceiptRecords(ctx)
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, errorf(CodeStageNotFound, "stage %s has no receipt yet", s.ID())
	}
	return &rs[len(rs)-1], nil
}
