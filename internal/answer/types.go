package answer

import (
	"bytes"
	"context"
	"encoding/base64"
	"time"
	"unicode/utf8"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/flow"
	"github.com/wtx-dev/wtx/receipt"
)

// Begin answers begin.
type Begin struct {
	Tx             string            `json:"tx"`
	Name           string            `json:"name"`
	Backend        string            `json:"backend"`
	BackendSkipped []wtx.BackendSkip `json:"backend_skipped"`
	BaseDigest     string            `json:"base_digest,omitempty"`
	// At and SetBack, for begin --at: the op the view stands right after,
	// and how many paths were set back to it.
	At      string `json:"at,omitempty"`
	SetBack *int   `json:"set_back,omitempty"`
}

// ListStage is one row of list.
type ListStage struct {
	Tx      string       `json:"tx"`
	Name    string       `json:"name,omitempty"`
	Created time.Time    `json:"created"`
	Backend string       `json:"backend"`
	State   string       `json:"state"`
	Running bool         `json:"running"`
	Run     *wtx.RunInfo `json:"run,omitempty"`
	Counts  *wtx.Counts  `json:"counts,omitempty"`
	// Size is the disk the stage's own directory takes, in bytes.
	Size int64 `json:"size"`
}

// List answers list: the stages of one workspace.
type List struct {
	Workspace    string      `json:"workspace"`
	WorkspaceB64 string      `json:"workspace_b64,omitempty"`
	Stages       []ListStage `json:"stages"`
}

// ListAll answers list --all: every workspace of the state root.
type ListAll struct {
	StateDir    string          `json:"state_dir"`
	StateDirB64 string          `json:"state_dir_b64,omitempty"`
	Workspaces  []WorkspaceInfo `json:"workspaces"`
}

// WorkspaceInfo is one workspace of a state root, as list --all shows it.
type WorkspaceInfo struct {
	Path    string `json:"path"`
	PathB64 string `json:"path_b64,omitempty"`
	// Missing is set when the workspace's directory is gone.
	Missing bool `json:"missing,omitempty"`
	// Open counts its open stages; Stages all its stages still recorded.
	Open   int `json:"open"`
	Stages int `json:"stages"`
	// OpenTxs are the open stages' ids.
	OpenTxs []string `json:"open_txs"`
	// Size is the disk its stages' state takes, in bytes.
	Size int64 `json:"size"`
	// Ops counts its applied ops (undo's history).
	Ops int `json:"ops"`
}

// Diff answers diff: the change set (and, for MCP, its text).
type Diff struct {
	Tx              string       `json:"tx"`
	Diff            string       `json:"diff,omitempty"`
	DiffB64         string       `json:"diff_b64,omitempty"`
	Changes         []wtx.Change `json:"changes"`
	Counts          wtx.Counts   `json:"counts"`
	ChangesetDigest string       `json:"changeset_digest"`
	Special         []string     `json:"special"`
	SpecialB64      []string     `json:"special_b64,omitempty"`
	// Drift is set for diff --drift (the drift argument): per path that
	// blocks an apply, the workspace's change since the stage's base.
	Drift []wtx.DriftEntry `json:"drift,omitempty"`
}

// Drift answers diff --drift: per conflicting path, the workspace's change
// since the stage's base.
type Drift struct {
	Tx    string           `json:"tx"`
	Paths []wtx.DriftEntry `json:"paths"`
	// Diff is the workspace's changes as a unified diff (where the base
	// content is known); DiffB64 when it is not UTF-8.
	Diff    string `json:"diff"`
	DiffB64 string `json:"diff_b64,omitempty"`
}

// Apply answers apply (and commit).
type Apply struct {
	Tx                string       `json:"tx"`
	OpID              *string      `json:"op_id"`
	Strategy          string       `json:"strategy"`
	Changes           []wtx.Change `json:"changes"`
	Counts            wtx.Counts   `json:"counts"`
	ChangesetDigest   string       `json:"changeset_digest"`
	DryRun            bool         `json:"dry_run"`
	Settled           bool         `json:"settled"`
	Written           []string     `json:"written"`
	WrittenB64        []string     `json:"written_b64,omitempty"`
	AlreadyApplied    []string     `json:"already_applied"`
	AlreadyAppliedB64 []string     `json:"already_applied_b64,omitempty"`
	// AppliedIn names the stage's earlier ops that already applied what
	// this apply found in place.
	AppliedIn []string         `json:"applied_in"`
	Receipt   *receipt.Receipt `json:"receipt"`
}

// NewApply renders an apply's result.
func NewApply(tx string, r *wtx.ApplyResult) Apply {
	a := Apply{Tx: tx, OpID: OpID(r.OpID), Strategy: wtx.StrategyJournaled, Changes: orEmpty(r.Changes), Counts: r.Counts,
		ChangesetDigest: r.ChangesetDigest, DryRun: r.DryRun, Settled: r.Settled, Receipt: r.Receipt, AppliedIn: orEmpty(r.AppliedIn)}
	a.Written, a.WrittenB64 = Names(r.Written)
	a.AlreadyApplied, a.AlreadyAppliedB64 = Names(r.AlreadyApplied)
	return a
}

// File answers read, write, edit and rm.
type File struct {
	Tx      string `json:"tx"`
	TxOp    int    `json:"tx_op"`
	Path    string `json:"path"`
	PathB64 string `json:"path_b64,omitempty"`
	// Digest is the content's digest now (pass it as expect-hash to a
	// later write or edit); Before the digest the path had in the stage
	// before the op, or "absent".
	Digest string `json:"digest,omitempty"`
	Size   int64  `json:"size"`
	Before string `json:"before,omitempty"`
	// Changes is the op's change to the stage (SPEC §4 change objects;
	// empty for a read), Strategy how it reaches the workspace.
	Changes  []wtx.Change `json:"changes"`
	Strategy string       `json:"strategy,omitempty"`
	// Content is a read's content when it is UTF-8 text; ContentB64 (and
	// Binary) when it is not.
	Content    string `json:"content,omitempty"`
	ContentB64 string `json:"content_b64,omitempty"`
	Binary     bool   `json:"binary,omitempty"`
}

// NewFile renders a per-file op's result.
func NewFile(tx string, r *wtx.FileResult) File {
	f := File{Tx: tx, TxOp: r.TxOp, Digest: r.Digest, Size: r.Size, Before: r.Before, Changes: orEmpty(r.Changes), Strategy: r.Strategy}
	f.Path, f.PathB64 = Name(r.Path)
	return f
}

// Rebase answers rebase.
type Rebase struct {
	Tx         string   `json:"tx"`
	Rebased    []string `json:"rebased"`
	RebasedB64 []string `json:"rebased_b64,omitempty"`
	Merged     []string `json:"merged"`
	MergedB64  []string `json:"merged_b64,omitempty"`
	// Conflicted are merged paths that hold conflict markers now.
	Conflicted    []string `json:"conflicted"`
	ConflictedB64 []string `json:"conflicted_b64,omitempty"`
}

// NewRebase renders a rebase's result.
func NewRebase(tx string, r *wtx.RebaseResult) Rebase {
	out := Rebase{Tx: tx}
	out.Rebased, out.RebasedB64 = Names(r.Rebased)
	out.Merged, out.MergedB64 = Names(r.Merged)
	out.Conflicted, out.ConflictedB64 = Names(r.Conflicted)
	return out
}

// DropOp answers drop-op: the op numbers dropped and the paths that got
// back their staged state from before them.
type DropOp struct {
	Tx          string   `json:"tx"`
	From        int      `json:"from"`
	Dropped     []int    `json:"dropped"`
	Restored    []string `json:"restored"`
	RestoredB64 []string `json:"restored_b64,omitempty"`
}

// Batch answers batch.
type Batch struct {
	Tx       string                `json:"tx"`
	OpID     *string               `json:"op_id"`
	Strategy string                `json:"strategy"`
	Items    []wtx.BatchItemResult `json:"items"`
	Changes  []wtx.Change          `json:"changes"`
}

// Dropped is one stage drop discarded.
type Dropped struct {
	Tx    string `json:"tx"`
	State string `json:"state"`
	// Discarded are the paths of its change set that were thrown away.
	Discarded    []string `json:"discarded"`
	DiscardedB64 []string `json:"discarded_b64,omitempty"`
}

// Drop answers drop (and abort). With one stage, its fields are repeated
// at top level.
type Drop struct {
	Stages       []Dropped `json:"stages"`
	Tx           string    `json:"tx,omitempty"`
	State        string    `json:"state,omitempty"`
	Discarded    []string  `json:"discarded"`
	DiscardedB64 []string  `json:"discarded_b64,omitempty"`
}

// DropPartial follows the error of a drop that refused some stages: the
// stages dropped all the same.
type DropPartial struct {
	Stages []Dropped `json:"stages"`
}

// Fork answers fork.
type Fork struct {
	Tx         string `json:"tx"`
	Name       string `json:"name"`
	ForkedFrom string `json:"forked_from"`
	Backend    string `json:"backend"`
	BaseDigest string `json:"base_digest"`
}

// GC answers gc for one workspace.
type GC struct {
	Stages []string `json:"stages"`
	Blobs  int      `json:"blobs"`
	Bytes  int64    `json:"bytes"`
	DryRun bool     `json:"dry_run"`
	// OlderThan is the age in seconds a settled stage must have reached
	// to go.
	OlderThan float64 `json:"older_than_seconds"`
	// Kept says what was kept, and why.
	Kept wtx.GCKept `json:"kept"`
}

// GCWorkspace is one workspace's part of gc --all.
type GCWorkspace struct {
	Path    string   `json:"path"`
	PathB64 string   `json:"path_b64,omitempty"`
	Stages  []string `json:"stages"`
	Bytes   int64    `json:"bytes"`
	// Skipped says why the workspace was left alone (its directory is
	// gone, say), when it was.
	Skipped string `json:"skipped,omitempty"`
}

// GCAll answers gc --all.
type GCAll struct {
	Workspaces []GCWorkspace `json:"workspaces"`
	Stages     int           `json:"stages"`
	Blobs      int           `json:"blobs"`
	Bytes      int64         `json:"bytes"`
	DryRun     bool          `json:"dry_run"`
	OlderThan  float64       `json:"older_than_seconds"`
}

// Fsck answers fsck.
type Fsck struct {
	StateDir    string          `json:"state_dir"`
	StateDirB64 string          `json:"state_dir_b64,omitempty"`
	SetAside    string          `json:"set_aside,omitempty"`
	SetAsideB64 string          `json:"set_aside_b64,omitempty"`
	Findings    []wtx.Finding   `json:"findings"`
	Checked     wtx.FsckChecked `json:"checked"`
}

// Log answers log.
type Log struct {
	Workspace    string    `json:"workspace"`
	WorkspaceB64 string    `json:"workspace_b64,omitempty"`
	Ops          []*wtx.Op `json:"ops"`
}

// Show answers show.
type Show struct {
	Op      *wtx.Op      `json:"op"`
	OpID    string       `json:"op_id"`
	Changes []wtx.Change `json:"changes"`
}

// Undo answers undo.
type Undo struct {
	OpID       *string          `json:"op_id"`
	Strategy   string           `json:"strategy"`
	Undoes     string           `json:"undoes"`
	Written    []string         `json:"written"`
	WrittenB64 []string         `json:"written_b64,omitempty"`
	Receipt    *receipt.Receipt `json:"receipt"`
}

// NewUndo renders an undo's result.
func NewUndo(r *wtx.UndoResult) Undo {
	u := Undo{OpID: OpID(r.OpID), Strategy: wtx.StrategyJournaled, Undoes: r.Undoes, Receipt: r.Receipt}
	u.Written, u.WrittenB64 = Names(r.Written)
	return u
}

// SetAside answers recover --set-aside.
type SetAside struct {
	OpID     string `json:"op_id"`
	SetAside string `json:"set_aside"`
}

// Recover answers recover.
type Recover struct {
	Recover *wtx.RecoverResult `json:"recover"`
}

// Receipt answers receipt: the receipt and, when signed, its DSSE
// envelope (null for an unsigned one).
type Receipt struct {
	Receipt  *receipt.Receipt  `json:"receipt"`
	Envelope *receipt.Envelope `json:"envelope"`
	Signed   bool              `json:"signed"`
}

// ReceiptList answers receipt T --all: every receipt of the stage, oldest
// first.
type ReceiptList struct {
	Tx       string    `json:"tx"`
	Receipts []Receipt `json:"receipts"`
}

// ReceiptVerify answers receipt verify.
type ReceiptVerify struct {
	ReceiptID string `json:"receipt_id"`
	Valid     bool   `json:"valid"`
	Status    string `json:"status"`
	Kind      string `json:"kind"`
	KeyID     string `json:"key_id"`
	// KeySource says which key verified: given, current or retired.
	KeySource string `json:"key_source"`
	// Checked lists every check made (all passed).
	Checked []receipt.Check `json:"checked"`
}

// ReceiptKey answers receipt key.
type ReceiptKey struct {
	KeyID     string `json:"key_id"`
	PublicKey string `json:"public_key"`
}

// ReceiptKeyList answers receipt key --all: the current key first, then
// the older keys the state root keeps.
type ReceiptKeyList struct {
	Keys []ReceiptKeyEntry `json:"keys"`
}

// ReceiptKeyEntry is one key of receipt key --all.
type ReceiptKeyEntry struct {
	KeyID     string `json:"key_id"`
	PublicKey string `json:"public_key"`
	Current   bool   `json:"current"`
}

// ReceiptKeyNew answers receipt key new.
type ReceiptKeyNew struct {
	*wtx.KeyChange
	PublicKey string `json:"public_key"`
}

// Stopped is one process a command left running, stopped after it.
type Stopped struct {
	PID     int    `json:"pid"`
	Comm    string `json:"comm"`
	CommB64 string `json:"comm_b64,omitempty"`
}

// NewStopped renders the processes a run stopped (never null).
func NewStopped(procs []wtx.StoppedProcess) []Stopped {
	out := make([]Stopped, 0, len(procs))
	for _, p := range procs {
		s := Stopped{PID: p.PID}
		s.Comm, s.CommB64 = Name(p.Comm)
		out = append(out, s)
	}
	return out
}

// Run answers run and shell.
type Run struct {
	Tx               string              `json:"tx"`
	ExitCode         int                 `json:"exit_code"`
	Signal           string              `json:"signal,omitempty"`
	Backend          string              `json:"backend"`
	Changes          []wtx.Change        `json:"changes"`
	Counts           wtx.Counts          `json:"counts"`
	ChangesetDigest  string              `json:"changeset_digest"`
	LeftOut          []wtx.LeftOut       `json:"left_out"`
	Special          []string            `json:"special"`
	SpecialB64       []string            `json:"special_b64,omitempty"`
	RootModeChange   *wtx.RootModeChange `json:"root_mode_change,omitempty"`
	Receipt          *receipt.Receipt    `json:"receipt,omitempty"`
	NotTransactional []string            `json:"not_transactional"`
	Settled          bool                `json:"settled"`
	Containment      string              `json:"containment"`
	Stopped          []Stopped           `json:"stopped"`
	// Applied, OpID and Dropped are set by --apply-on-success.
	Applied *bool   `json:"applied,omitempty"`
	OpID    *string `json:"op_id,omitempty"`
	Dropped bool    `json:"dropped,omitempty"`
	State   string  `json:"state"`
	// Stdout and Stderr are the command's output, captured (MCP only: the
	// command line passes them through, stdout moved to stderr under
	// --json).
	Stdout    string `json:"stdout,omitempty"`
	StdoutB64 string `json:"stdout_b64,omitempty"`
	Stderr    string `json:"stderr,omitempty"`
	StderrB64 string `json:"stderr_b64,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	TimedOut  bool   `json:"timed_out,omitempty"`
}

// NewRun renders a run's result.
func NewRun(st *wtx.Stage, res *wtx.RunResult) Run {
	r := Run{Tx: st.ID(), ExitCode: res.ExitCode, Signal: res.Signal, Backend: st.Backend(), Changes: []wtx.Change{},
		LeftOut: []wtx.LeftOut{}, Special: []string{}, NotTransactional: []string{}, Settled: res.Settled,
		Containment: res.Containment, Stopped: NewStopped(res.Stopped), State: st.State(), Receipt: res.Receipt}
	if res.Changes != nil {
		r.Changes, r.Counts, r.ChangesetDigest = orEmpty(res.Changes.Changes), res.Changes.Counts, res.Changes.Digest
		r.LeftOut = orEmpty(res.Changes.LeftOut)
		r.Special, r.SpecialB64 = Names(res.Changes.Special)
		r.RootModeChange = res.Changes.RootMode
	}
	if res.Receipt != nil {
		r.NotTransactional = orEmpty(res.Receipt.NotTransactional)
	}
	return r
}

// NewRead renders a read's result with its content.
func NewRead(tx string, r *wtx.FileResult) File {
	f := NewFile(tx, r)
	if utf8.Valid(r.Content) && !bytes.ContainsRune(r.Content, 0) {
		f.Content = string(r.Content)
	} else {
		f.ContentB64 = base64.StdEncoding.EncodeToString(r.Content)
		f.Binary = true
	}
	return f
}

// NewBatch renders a batch's result.
func NewBatch(r *wtx.BatchResult) Batch {
	b := Batch{Tx: r.Tx, OpID: OpID(r.OpID), Strategy: wtx.StrategyJournaled, Items: orEmpty(r.Items), Changes: []wtx.Change{}}
	if r.Apply != nil {
		b.Changes = orEmpty(r.Apply.Changes)
	}
	return b
}

// ListOf is the list answer of a workspace: its open stages, and its
// settled ones when settled is set. The command line and the MCP server
// both answer with it.
func ListOf(ctx context.Context, ws *wtx.Workspace, settled bool) (List, error) {
	stages, err := ws.Stages(ctx)
	if err != nil {
		return List{}, err
	}
	out := List{Stages: []ListStage{}}
	out.Workspace, out.WorkspaceB64 = Name(ws.Path())
	for _, st := range stages {
		if !settled && st.State() != wtx.StateOpen {
			continue
		}
		r := ListStage{Tx: st.ID(), Name: st.Name(), Created: st.Created(), Backend: st.Backend(), State: st.State(), Size: st.DiskUsage()}
		if st.State() == wtx.StateOpen {
			run, err := st.Running(ctx)
			if err != nil {
				return List{}, err
			}
			r.Running, r.Run = run != nil, run
			if cs, err := st.Changes(ctx, nil); err == nil {
				r.Counts = &cs.Counts
			}
		}
		out.Stages = append(out.Stages, r)
	}
	return out, nil
}

// Flow answers flow run, resume, show and abandon: the run as it stands.
type Flow struct {
	Run *flow.Run `json:"run"`
}

// FlowList answers flow list.
type FlowList struct {
	Runs []*flow.Run `json:"runs"`
}
