package receipt

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"

	"github.com/wtx-dev/wtx/internal/quote"
)

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

// Refusal is the refusal a receipt records.
type Refusal struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Counts tallies a change set by action.
type Counts struct {
	Added    int `json:"added"`
	Modified int `json:"modified"`
	Deleted  int `json:"deleted"`
}

// ComputeDigest returns the digest of r's fields other than Digest.
func (r Receipt) ComputeDigest() string {
	r.Digest = ""
	data, _ := json.Marshal(r) // a receipt always encodes
	return fmt.Sprintf("sha256:%x", sha256.Sum256(data))
}

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

// NotConfined is the not_transactional entry of a run whose command was
// not confined to its view (T-002): a copy or clone view where no
// namespaces can be made, so the command ran in the view's own directory,
// and the workspace's own path stayed the real workspace.
const NotConfined = "writes through the workspace's own path (the command ran unconfined: no namespaces of its own here)"

// legacyCopyDisclaimer is what receipts said for every copy run before
// copy views were confined; a receipt carrying it still verifies.
const legacyCopyDisclaimer = "writes through the workspace's absolute path (the copy backend runs the command in the view's own directory)"

// SharedPath is the not_transactional entry of a shared selector.
func SharedPath(sel string) string { return "shared path " + quote.Path(sel) }

// The containments a run receipt names (wtx's sandbox says which held a
// command's processes; these are its persisted names).
const (
	containPIDNamespace = "pid-namespace"
	containSubreaper    = "subreaper"
)

// ContainmentComplete reports whether a receipt's containment stopped
// every process the command started, however it detached itself.
func ContainmentComplete(c string) bool {
	return c == containPIDNamespace || c == containSubreaper
}
