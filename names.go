package wtx

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/wtx-dev/wtx/internal/jsonname"
	"github.com/wtx-dev/wtx/internal/quote"
)

// Names are bytes (I-001): every record and answer that carries a name, an
// argument or an edit text goes through JSON with the convention of
// internal/jsonname — the field itself (the name, or its quoted form when
// it is not valid UTF-8) and, only then, X_b64 with the exact bytes. The
// types below keep their Go fields as plain strings; these methods add the
// byte-safe siblings and read them back. Field order is the order of the
// Go structs, so a record without such names encodes as it always did.

type sideJSON struct {
	Type      string `json:"type"`
	Mode      string `json:"mode,omitempty"`
	Size      int64  `json:"size"`
	Digest    string `json:"digest,omitempty"`
	Target    string `json:"target,omitempty"`
	TargetB64 string `json:"target_b64,omitempty"`
}

// MarshalJSON writes the side with a byte-safe target.
func (s Side) MarshalJSON() ([]byte, error) {
	return json.Marshal(sideJSON{s.Type, s.Mode, s.Size, s.Digest, jsonname.Text(s.Target), jsonname.B64(s.Target)})
}

// UnmarshalJSON reads what MarshalJSON writes (and records without
// target_b64).
func (s *Side) UnmarshalJSON(data []byte) error {
	var j sideJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	return j.side(s)
}

func (j *sideJSON) side(s *Side) error {
	target, err := jsonname.Name(j.Target, j.TargetB64)
	if err != nil {
		return err
	}
	*s = Side{j.Type, j.Mode, j.Size, j.Digest, target}
	return nil
}

// sidePtr converts a decoded side, keeping nil for an absent one.
func sidePtr(j *sideJSON) (*Side, error) {
	if j == nil {
		return nil, nil
	}
	s := new(Side)
	return s, j.side(s)
}

type changeJSON struct {
	Path      string `json:"path"`
	PathB64   string `json:"path_b64,omitempty"`
	Action    string `json:"action"`
	Type      string `json:"type,omitempty"`
	Mode      string `json:"mode,omitempty"`
	Size      *int64 `json:"size,omitempty"`
	Digest    string `json:"digest,omitempty"`
	Target    string `json:"target,omitempty"`
	TargetB64 string `json:"target_b64,omitempty"`
	Before    *Side  `json:"before,omitempty"`
}

// MarshalJSON writes the change with a byte-safe path and target.
func (c Change) MarshalJSON() ([]byte, error) {
	return json.Marshal(changeJSON{jsonname.Text(c.Path), jsonname.B64(c.Path), c.Action, c.Type, c.Mode, c.Size, c.Digest,
		jsonname.Text(c.Target), jsonname.B64(c.Target), c.Before})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (c *Change) UnmarshalJSON(data []byte) error {
	var j changeJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	p, err := jsonname.Name(j.Path, j.PathB64)
	if err != nil {
		return err
	}
	target, err := jsonname.Name(j.Target, j.TargetB64)
	if err != nil {
		return err
	}
	*c = Change{p, j.Action, j.Type, j.Mode, j.Size, j.Digest, target, j.Before}
	return nil
}

type conflictJSON struct {
	Path    string `json:"path"`
	PathB64 string `json:"path_b64,omitempty"`
	Kind    string `json:"kind"`
	Class   string `json:"class"`
	Base    string `json:"base,omitempty"`
	Current string `json:"current,omitempty"`
	Detail  string `json:"detail,omitempty"`
	Op      string `json:"op_id,omitempty"`
}

// MarshalJSON writes the conflict with a byte-safe path and its class.
func (c Conflict) MarshalJSON() ([]byte, error) {
	return json.Marshal(conflictJSON{jsonname.Text(c.Path), jsonname.B64(c.Path), c.Kind, string(c.Class()), c.Base, c.Current, c.Detail, c.Op})
}

type repairJSON struct {
	Action   RepairAction  `json:"action"`
	Class    ConflictClass `json:"class,omitempty"`
	Detail   string        `json:"detail"`
	Stage    string        `json:"tx,omitempty"`
	Paths    []string      `json:"paths,omitempty"`
	PathsB64 []string      `json:"paths_b64,omitempty"`
	Command  string        `json:"command,omitempty"`
}

// MarshalJSON writes the repair with byte-safe paths.
func (r Repair) MarshalJSON() ([]byte, error) {
	j := repairJSON{Action: r.Action, Class: r.Class, Detail: r.Detail, Stage: r.Stage, Command: r.Command}
	if len(r.Paths) > 0 {
		j.Paths, j.PathsB64 = jsonname.Texts(r.Paths), jsonname.B64s(r.Paths)
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Repair) UnmarshalJSON(data []byte) error {
	var j repairJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	paths, err := jsonname.Names(j.Paths, j.PathsB64)
	if err != nil {
		return fmt.Errorf("paths: %w", err)
	}
	*r = Repair{Action: j.Action, Class: j.Class, Detail: j.Detail, Stage: j.Stage, Paths: paths, Command: j.Command}
	return nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (c *Conflict) UnmarshalJSON(data []byte) error {
	var j conflictJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	p, err := jsonname.Name(j.Path, j.PathB64)
	if err != nil {
		return err
	}
	*c = Conflict{p, j.Kind, j.Base, j.Current, j.Detail, j.Op}
	return nil
}

type fileResultJSON struct {
	TxOp     int      `json:"tx_op"`
	Path     string   `json:"path"`
	PathB64  string   `json:"path_b64,omitempty"`
	Digest   string   `json:"digest,omitempty"`
	Size     int64    `json:"size"`
	Before   string   `json:"before,omitempty"`
	Changes  []Change `json:"changes"`
	Strategy string   `json:"strategy,omitempty"`
}

// MarshalJSON writes the result with a byte-safe path.
func (r FileResult) MarshalJSON() ([]byte, error) {
	return json.Marshal(fileResultJSON{r.TxOp, jsonname.Text(r.Path), jsonname.B64(r.Path), r.Digest, r.Size, r.Before, nonNil(r.Changes), r.Strategy})
}

type txFileJSON struct {
	Path    string `json:"path"`
	PathB64 string `json:"path_b64,omitempty"`
	Before  *Side  `json:"before"`
	After   *Side  `json:"after"`
}

// MarshalJSON writes the file with a byte-safe path.
func (f TxFile) MarshalJSON() ([]byte, error) {
	return json.Marshal(txFileJSON{jsonname.Text(f.Path), jsonname.B64(f.Path), f.Before, f.After})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (f *TxFile) UnmarshalJSON(data []byte) error {
	var j txFileJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	p, err := jsonname.Name(j.Path, j.PathB64)
	if err != nil {
		return err
	}
	*f = TxFile{p, j.Before, j.After}
	return nil
}

type txOpJSON struct {
	Seq        int       `json:"tx_op"`
	Kind       string    `json:"kind"`
	Argv       []string  `json:"argv"`
	ArgvB64    []string  `json:"argv_b64,omitempty"`
	Created    time.Time `json:"created"`
	Files      []TxFile  `json:"files"`
	Old        string    `json:"old,omitempty"`
	OldB64     string    `json:"old_b64,omitempty"`
	New        string    `json:"new,omitempty"`
	NewB64     string    `json:"new_b64,omitempty"`
	All        bool      `json:"all,omitempty"`
	ExpectHash string    `json:"expect_hash,omitempty"`
	Status     string    `json:"status,omitempty"`
	Signal     string    `json:"signal,omitempty"`
	Checkpoint bool      `json:"checkpoint,omitempty"`
	Mkdirs     []string  `json:"mkdirs,omitempty"`
	MkdirsB64  []string  `json:"mkdirs_b64,omitempty"`
	Pending    *TxIntent `json:"pending,omitempty"`
	Flow       string    `json:"flow,omitempty"`
}

// MarshalJSON writes the op with byte-safe arguments and edit texts.
func (op TxOp) MarshalJSON() ([]byte, error) {
	return json.Marshal(txOpJSON{op.Seq, op.Kind, jsonname.Texts(op.Argv), jsonname.B64s(op.Argv), op.Created, op.Files,
		jsonname.Text(op.Old), jsonname.B64(op.Old), jsonname.Text(op.New), jsonname.B64(op.New), op.All, op.ExpectHash, op.Status, op.Signal, op.Checkpoint,
		jsonname.Texts(op.Mkdirs), jsonname.B64s(op.Mkdirs), op.Pending, op.Flow})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (op *TxOp) UnmarshalJSON(data []byte) error { return decodeTxOp(data, op) }

// txOpDecodeJSON is txOpJSON with types that have no JSON methods of their
// own, all the way down: a run's record carries every file it changed, and
// decoding it through nested UnmarshalJSON methods would scan each file's
// bytes once per level.
type txOpDecodeJSON struct {
	txOpJSON
	Files []txFileDecodeJSON `json:"files"`
}

type txFileDecodeJSON struct {
	Path    string    `json:"path"`
	PathB64 string    `json:"path_b64,omitempty"`
	Before  *sideJSON `json:"before"`
	After   *sideJSON `json:"after"`
}

// decodeTxOp reads a tx op's record (what TxOp.MarshalJSON writes) in one
// pass over its bytes.
func decodeTxOp(data []byte, op *TxOp) error {
	var j txOpDecodeJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	var files []TxFile
	if j.Files != nil {
		files = make([]TxFile, len(j.Files))
	}
	for i := range j.Files {
		f := &j.Files[i]
		p, err := jsonname.Name(f.Path, f.PathB64)
		if err != nil {
			return err
		}
		before, err := sidePtr(f.Before)
		if err != nil {
			return err
		}
		after, err := sidePtr(f.After)
		if err != nil {
			return err
		}
		files[i] = TxFile{p, before, after}
	}
	j.txOpJSON.Files = files
	return j.txOpJSON.txOp(op)
}

func (j *txOpJSON) txOp(op *TxOp) error {
	argv, err := jsonname.Names(j.Argv, j.ArgvB64)
	if err != nil {
		return fmt.Errorf("argv: %w", err)
	}
	old, err := jsonname.Name(j.Old, j.OldB64)
	if err != nil {
		return err
	}
	nw, err := jsonname.Name(j.New, j.NewB64)
	if err != nil {
		return err
	}
	mkdirs, err := jsonname.Names(j.Mkdirs, j.MkdirsB64)
	if err != nil {
		return fmt.Errorf("mkdirs: %w", err)
	}
	*op = TxOp{Seq: j.Seq, Kind: j.Kind, Argv: argv, Created: j.Created, Files: j.Files, Old: old, New: nw, All: j.All, ExpectHash: j.ExpectHash, Status: j.Status, Signal: j.Signal, Checkpoint: j.Checkpoint,
		Mkdirs: mkdirs, Pending: j.Pending, Flow: j.Flow}
	return nil
}

type stageConfigJSON struct {
	Exclude    []string       `json:"exclude,omitempty"`
	ExcludeB64 []string       `json:"exclude_b64,omitempty"`
	Share      []string       `json:"share,omitempty"`
	ShareB64   []string       `json:"share_b64,omitempty"`
	Protect    []string       `json:"protect,omitempty"`
	ProtectB64 []string       `json:"protect_b64,omitempty"`
	Skipped    []BackendSkip  `json:"skipped,omitempty"`
	Ops        []string       `json:"ops,omitempty"`
	RootMode   *uint32        `json:"root_mode,omitempty"`
	At         string         `json:"at,omitempty"`
	Import     *ImportOrigin  `json:"import,omitempty"`
	Rebased    []RebaseMark   `json:"rebased,omitempty"`
	NoProject  bool           `json:"no_project,omitempty"`
	Conflicted []ConflictMark `json:"conflicted,omitempty"`
}

// MarshalJSON writes the configuration with byte-safe selectors.
func (c stageConfig) MarshalJSON() ([]byte, error) {
	return json.Marshal(stageConfigJSON{jsonname.Texts(c.Exclude), jsonname.B64s(c.Exclude), jsonname.Texts(c.Share), jsonname.B64s(c.Share),
		jsonname.Texts(c.Protect), jsonname.B64s(c.Protect), c.Skipped, c.Ops, c.RootMode, c.At, c.Import, c.Rebased, c.NoProject, c.Conflicted})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (c *stageConfig) UnmarshalJSON(data []byte) error {
	var j stageConfigJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	var err error
	out := stageConfig{Skipped: j.Skipped, Ops: j.Ops, RootMode: j.RootMode, At: j.At, Import: j.Import, Rebased: j.Rebased, NoProject: j.NoProject, Conflicted: j.Conflicted}
	if out.Exclude, err = jsonname.Names(j.Exclude, j.ExcludeB64); err != nil {
		return fmt.Errorf("exclude: %w", err)
	}
	if out.Share, err = jsonname.Names(j.Share, j.ShareB64); err != nil {
		return fmt.Errorf("share: %w", err)
	}
	if out.Protect, err = jsonname.Names(j.Protect, j.ProtectB64); err != nil {
		return fmt.Errorf("protect: %w", err)
	}
	*c = out
	return nil
}

type opJSON struct {
	ID         string    `json:"op_id"`
	Kind       string    `json:"kind"`
	Tx         string    `json:"tx"`
	Created    time.Time `json:"created"`
	Written    []string  `json:"written"`
	WrittenB64 []string  `json:"written_b64,omitempty"`
	Changes    []Change  `json:"changes"`
	Undoes     string    `json:"undoes,omitempty"`
	UndoneBy   string    `json:"undone_by,omitempty"`
	PartlyBy   []string  `json:"partly_undone_by,omitempty"`
}

// MarshalJSON writes the op with byte-safe paths.
func (op Op) MarshalJSON() ([]byte, error) {
	return json.Marshal(opJSON{op.ID, op.Kind, op.Tx, op.Created, jsonname.Texts(op.Written), jsonname.B64s(op.Written), op.Changes, op.Undoes, op.UndoneBy, op.PartlyUndoneBy})
}

type statusJSON struct {
	Tx               string          `json:"tx"`
	Name             string          `json:"name,omitempty"`
	State            string          `json:"state"`
	Running          bool            `json:"running"`
	Run              *RunInfo        `json:"run,omitempty"`
	Backend          string          `json:"backend"`
	Skipped          []BackendSkip   `json:"backend_skipped"`
	View             string          `json:"view"`
	Created          time.Time       `json:"created"`
	At               string          `json:"at,omitempty"`
	Exclude          []string        `json:"exclude"`
	ExcludeB64       []string        `json:"exclude_b64,omitempty"`
	Share            []string        `json:"share"`
	ShareB64         []string        `json:"share_b64,omitempty"`
	Protect          []string        `json:"protect"`
	ProtectB64       []string        `json:"protect_b64,omitempty"`
	Counts           Counts          `json:"counts"`
	ChangesetDigest  string          `json:"changeset_digest"`
	Changes          []Change        `json:"changes"`
	Drift            []Conflict      `json:"drift"`
	StaleReads       []Conflict      `json:"stale_reads"`
	Conflicted       []string        `json:"conflicted"`
	ConflictedB64    []string        `json:"conflicted_b64,omitempty"`
	Special          []string        `json:"special"`
	SpecialB64       []string        `json:"special_b64,omitempty"`
	LeftOut          []LeftOut       `json:"left_out"`
	RootMode         *RootModeChange `json:"root_mode_change,omitempty"`
	Ops              []string        `json:"ops"`
	TxOps            []TxOp          `json:"tx_ops"`
	NotTransactional []string        `json:"not_transactional"`
}

// MarshalJSON writes the status with byte-safe selectors and names.
func (s Status) MarshalJSON() ([]byte, error) {
	return json.Marshal(statusJSON{s.Tx, s.Name, s.State, s.Running, s.Run, s.Backend, s.Skipped, s.View, s.Created, s.At,
		jsonname.Texts(s.Exclude), jsonname.B64s(s.Exclude), jsonname.Texts(s.Share), jsonname.B64s(s.Share),
		jsonname.Texts(s.Protect), jsonname.B64s(s.Protect), s.Counts, s.ChangesetDigest, s.Changes, s.Drift, s.StaleReads,
		jsonname.Texts(s.Conflicted), jsonname.B64s(s.Conflicted), jsonname.Texts(s.Special), jsonname.B64s(s.Special), s.LeftOut, s.RootMode, s.Ops, s.TxOps, s.NotTransactional})
}

// shellQuote writes a name as one POSIX shell word (quote.Shell).
func shellQuote(s string) string { return quote.Shell(s) }

type findingJSON struct {
	Kind     FindingKind `json:"kind"`
	Code     string      `json:"code"`
	Path     string      `json:"path,omitempty"`
	PathB64  string      `json:"path_b64,omitempty"`
	Object   string      `json:"object,omitempty"`
	Detail   string      `json:"detail"`
	Repair   string      `json:"repair"`
	Repaired bool        `json:"repaired,omitempty"`
	// Workspace and Repairs: see Finding.
	Workspace    string   `json:"workspace,omitempty"`
	WorkspaceB64 string   `json:"workspace_b64,omitempty"`
	Repairs      []Repair `json:"repairs,omitempty"`
}

// MarshalJSON writes the finding with a byte-safe path.
func (f Finding) MarshalJSON() ([]byte, error) {
	return json.Marshal(findingJSON{f.Kind, f.Code, jsonname.Text(f.Path), jsonname.B64(f.Path), f.Object, f.Detail, f.Repair, f.Repaired,
		jsonname.Text(f.Workspace), jsonname.B64(f.Workspace), f.Repairs})
}

type fsckReportJSON struct {
	StateDir    string      `json:"state_dir"`
	StateDirB64 string      `json:"state_dir_b64,omitempty"`
	Findings    []Finding   `json:"findings"`
	Checked     FsckChecked `json:"checked"`
	SetAside    string      `json:"set_aside,omitempty"`
	SetAsideB64 string      `json:"set_aside_b64,omitempty"`
}

// MarshalJSON writes the report with byte-safe paths.
func (r FsckReport) MarshalJSON() ([]byte, error) {
	return json.Marshal(fsckReportJSON{jsonname.Text(r.StateDir), jsonname.B64(r.StateDir), r.Findings, r.Checked,
		jsonname.Text(r.SetAside), jsonname.B64(r.SetAside)})
}
