package wtx

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"

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
