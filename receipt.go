package wtx

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/quote"
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
	// LeftOut counts the paths a command wrote under an exclude selector
	// (topmost only: a directory counts once); LeftOutPaths names them.
	LeftOut          int      `json:"left_out,omitempty"`
	LeftOutPaths     []string `json:"left_out_paths,omitempty"`
	Protections      int      `json:"protections"`
	ProtectedPaths   int      `json:"protected_paths"`
	Approved         bool     `json:"approved"`
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

func (s *Stage) notTransactional() []string {
	out := append([]string(nil), NotTransactional...)
	for _, sh := range s.cfg.Share {
		out = append(out, "shared path "+quote.Path(sh))
	}
	if s.row.Backend == "copy" {
		out = append(out, "writes through the workspace's absolute path (the copy backend runs the command in the view's own directory)")
	}
	return out
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
		for i := range cs.changes {
			if s.protect.Match(cs.changes[i].Path) {
				r.ProtectedPaths++
			}
		}
	}
	return r
}

func (w *Workspace) storeReceipt(ctx context.Context, r *Receipt) error {
	r.Digest = r.ComputeDigest()
	body, err := json.Marshal(r)
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
	r.Approved = opts.Approve
	r.Paths = append(r.Paths, opts.Paths...)
	r.Refusal = &Refusal{Code: e.Code, Message: e.Message}
	if err := w.storeReceipt(ctx, &r); err != nil {
		w.log.Warn("store refusal receipt", "tx", s.ID(), "err", err)
	}
}

// Receipts returns the stage's receipts, oldest first.
func (s *Stage) Receipts(ctx context.Context) ([]Receipt, error) {
	rows, err := s.ws.db.ReceiptsForStage(ctx, s.ID())
	if err != nil {
		return nil, AsError(err)
	}
	out := make([]Receipt, 0, len(rows))
	for _, row := range rows {
		var r Receipt
		if err := json.Unmarshal(row.Body, &r); err != nil {
			return nil, &Error{Code: CodeInternal, Message: fmt.Sprintf("receipt %s is damaged: %v", row.ID, err)}
		}
		out = append(out, r)
	}
	return out, nil
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
