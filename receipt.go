package wtx

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/stage"
	"github.com/wtx-dev/wtx/internal/state"
	"github.com/wtx-dev/wtx/internal/tree"
)

// NotTransactional is what no stage covers; every run summary and receipt
// says so.
var NotTransactional = []string{
	"network calls",
	"databases and other services",
	NotOutliving,
	"writes to paths outside the workspace",
}

// NotOutliving is the item of NotTransactional that a run's receipt drops
// when every process the command started was stopped with it (L-002).
const NotOutliving = "processes started by the command that outlive it"

// Refusal is the refusal a receipt records.
type Refusal struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Receipt is the durable record of a run or an apply. Digest covers every
// other field; a receipt that lost or changed any of them no longer matches.
type Receipt struct {
	SchemaVersion   int       `json:"schema_version"`
	ID              string    `json:"id"`
	Kind            string    `json:"kind"` // "run" or "apply"
	Workspace       string    `json:"workspace"`
	Tx              string    `json:"tx"`
	OpID            string    `json:"op_id"`
	CreatedAt       time.Time `json:"created_at"`
	Backend         string    `json:"backend"`
	Command         []string  `json:"command"`
	ExitCode        *int      `json:"exit_code"`
	BaseDigest      string    `json:"base_digest"`
	ResultDigest    string    `json:"result_digest"`
	ChangesetDigest string    `json:"changeset_digest"`
	Counts          Counts    `json:"counts"`
	Paths           []string  `json:"paths"`
	Refusal         *Refusal  `json:"refusal"`
	Exclusions      int       `json:"exclusions"`
	// Share lists the stage's shared selectors: the view sees the
	// workspace's own copy there, so not_transactional names each.
	Share []string `json:"share,omitempty"`
	// LeftOut counts the paths a command wrote under an exclude selector
	// (topmost only: a directory counts once); LeftOutPaths names them.
	LeftOut      int      `json:"left_out,omitempty"`
	LeftOutPaths []string `json:"left_out_paths,omitempty"`
	Protections  int      `json:"protections"`
	// ProtectedPaths counts the protected paths (protect selectors, .git,
	// the project file) among those the op writes: for a run, those its
	// change set holds; for a refused apply, those it would have written.
	ProtectedPaths int `json:"protected_paths"`
	// Approved says whether approval for protected paths was given and
	// counted: asked for by an actor that may give it.
	Approved bool `json:"approved"`
	// Actor names who acted (T-003): "person", "mcp-agent", … (empty in
	// receipts made before it was recorded).
	Actor            string   `json:"actor,omitempty"`
	NotTransactional []string `json:"not_transactional"`
	// Containment (runs only) names what held the command's processes:
	// "pid-namespace" or "subreaper" (all were stopped with it),
	// "process-group" or "none" (a process that detached itself was not).
	Containment string `json:"containment,omitempty"`
	// Interrupted (runs only): the run's wtx was killed before it finished;
	// the change set is the one found afterwards and the exit status is
	// unknown (ExitCode nil).
	Interrupted bool   `json:"interrupted,omitempty"`
	Digest      string `json:"digest"`
}

// ComputeDigest returns the digest of r's fields other than Digest.
func (r Receipt) ComputeDigest() string {
	r.Digest = ""
	data, _ := json.Marshal(r)
	return fmt.Sprintf("sha256:%x", sha256.Sum256(data))
}

// unconfinedDisclaimer is the not_transactional entry of a run whose
// command was not confined to its view (T-002): a copy or clone view where
// no namespaces can be made, so the command ran in the view's own
// directory, and the workspace's own path stayed the real workspace.
const unconfinedDisclaimer = "writes through the workspace's own path (the command ran unconfined: no namespaces of its own here)"

// legacyCopyDisclaimer is what receipts said for every copy run before
// copy views were confined; a receipt carrying it still verifies.
const legacyCopyDisclaimer = "writes through the workspace's absolute path (the copy backend runs the command in the view's own directory)"

// sharedDisclaimer is the not_transactional entry of a shared selector.
func sharedDisclaimer(sel string) string { return "shared path " + quote.Path(sel) }

// containmentComplete reports whether a receipt's containment stopped
// every process the command started.
func containmentComplete(c string) bool { return stage.Containment(c).Complete() }

func (s *Stage) notTransactional() []string {
	out := append([]string(nil), NotTransactional...)
	for _, sh := range s.cfg.Share {
		out = append(out, sharedDisclaimer(sh))
	}
	if (s.row.Backend == "copy" || s.row.Backend == "clone") && !stage.CanConfineViews() {
		out = append(out, unconfinedDisclaimer)
	}
	return out
}

// markConfined makes a run receipt's not_transactional say whether its
// command ran confined to its view.
func (r *Receipt) markConfined(confined bool) {
	r.NotTransactional = withoutItem(r.NotTransactional, unconfinedDisclaimer)
	if !confined {
		r.NotTransactional = append(r.NotTransactional, unconfinedDisclaimer)
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
		r.ChangesetDigest, r.Counts = cs.Digest, cs.Counts
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
func (s *Stage) ReceiptRecords(ctx context.Context) ([]ReceiptRecord, error) {
	rows, err := s.ws.db.ReceiptsForStage(ctx, s.ID())
	if err != nil {
		return nil, AsError(err)
	}
	out := make([]ReceiptRecord, 0, len(rows))
	for _, row := range rows {
		rec, err := decodeReceiptBody(row.Body)
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
func (w *Workspace) ReceiptRecordsOf(ctx context.Context, ref string) (string, []ReceiptRecord, error) {
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
func (w *Workspace) ReceiptRecord(ctx context.Context, ref string) (*ReceiptRecord, error) {
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
