package receipt

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/wtx-dev/wtx/internal/jsonname"
)

// Names are bytes: a receipt's workspace, command, paths and selectors go
// through JSON with the convention of internal/jsonname, the field itself
// (the name, or its quoted form when it is not valid UTF-8) and, only
// then, X_b64 with the exact bytes. Field order is the order of Receipt,
// so a receipt without such names encodes as it always did, and the
// digests of stored receipts still match.

// receiptJSON is a receipt as JSON: the fields of Receipt, in its order,
// with the byte-safe siblings of its names.
type receiptJSON struct {
	SchemaVersion    int       `json:"schema_version"`
	ID               string    `json:"id"`
	Kind             string    `json:"kind"`
	Workspace        string    `json:"workspace"`
	WorkspaceB64     string    `json:"workspace_b64,omitempty"`
	Tx               string    `json:"tx"`
	OpID             string    `json:"op_id"`
	CreatedAt        time.Time `json:"created_at"`
	Backend          string    `json:"backend"`
	Command          []string  `json:"command"`
	CommandB64       []string  `json:"command_b64,omitempty"`
	ExitCode         *int      `json:"exit_code"`
	BaseDigest       string    `json:"base_digest"`
	ResultDigest     string    `json:"result_digest"`
	ChangesetDigest  string    `json:"changeset_digest"`
	Counts           Counts    `json:"counts"`
	Paths            []string  `json:"paths"`
	PathsB64         []string  `json:"paths_b64,omitempty"`
	Refusal          *Refusal  `json:"refusal"`
	Exclusions       int       `json:"exclusions"`
	Share            []string  `json:"share,omitempty"`
	ShareB64         []string  `json:"share_b64,omitempty"`
	LeftOut          int       `json:"left_out,omitempty"`
	LeftOutPaths     []string  `json:"left_out_paths,omitempty"`
	LeftOutPathsB64  []string  `json:"left_out_paths_b64,omitempty"`
	Protections      int       `json:"protections"`
	ProtectedPaths   int       `json:"protected_paths"`
	Approved         bool      `json:"approved"`
	Actor            string    `json:"actor,omitempty"`
	NotTransactional []string  `json:"not_transactional"`
	Containment      string    `json:"containment,omitempty"`
	Interrupted      bool      `json:"interrupted,omitempty"`
	Digest           string    `json:"digest"`
}

func (r Receipt) toJSON() receiptJSON {
	return receiptJSON{r.SchemaVersion, r.ID, r.Kind, jsonname.Text(r.Workspace), jsonname.B64(r.Workspace), r.Tx, r.OpID, r.CreatedAt,
		r.Backend, jsonname.Texts(r.Command), jsonname.B64s(r.Command), r.ExitCode, r.BaseDigest, r.ResultDigest, r.ChangesetDigest,
		r.Counts, jsonname.Texts(r.Paths), jsonname.B64s(r.Paths), r.Refusal, r.Exclusions,
		jsonname.Texts(r.Share), jsonname.B64s(r.Share), r.LeftOut, jsonname.Texts(r.LeftOutPaths), jsonname.B64s(r.LeftOutPaths), r.Protections, r.ProtectedPaths,
		r.Approved, r.Actor, r.NotTransactional, r.Containment, r.Interrupted, r.Digest}
}

func (j receiptJSON) receipt() (Receipt, error) {
	ws, err := jsonname.Name(j.Workspace, j.WorkspaceB64)
	if err != nil {
		return Receipt{}, fmt.Errorf("workspace: %w", err)
	}
	cmd, err := jsonname.Names(j.Command, j.CommandB64)
	if err != nil {
		return Receipt{}, fmt.Errorf("command: %w", err)
	}
	paths, err := jsonname.Names(j.Paths, j.PathsB64)
	if err != nil {
		return Receipt{}, fmt.Errorf("paths: %w", err)
	}
	share, err := jsonname.Names(j.Share, j.ShareB64)
	if err != nil {
		return Receipt{}, fmt.Errorf("share: %w", err)
	}
	leftOut, err := jsonname.Names(j.LeftOutPaths, j.LeftOutPathsB64)
	if err != nil {
		return Receipt{}, fmt.Errorf("left_out_paths: %w", err)
	}
	return Receipt{j.SchemaVersion, j.ID, j.Kind, ws, j.Tx, j.OpID, j.CreatedAt, j.Backend, cmd, j.ExitCode,
		j.BaseDigest, j.ResultDigest, j.ChangesetDigest, j.Counts, paths, j.Refusal, j.Exclusions, share, j.LeftOut, leftOut, j.Protections,
		j.ProtectedPaths, j.Approved, j.Actor, j.NotTransactional, j.Containment, j.Interrupted, j.Digest}, nil
}

// MarshalJSON writes the receipt with byte-safe names.
func (r Receipt) MarshalJSON() ([]byte, error) { return json.Marshal(r.toJSON()) }

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Receipt) UnmarshalJSON(data []byte) error {
	var j receiptJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	out, err := j.receipt()
	if err != nil {
		return err
	}
	*r = out
	return nil
}
