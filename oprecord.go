package wtx

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/wtx-dev/wtx/internal/jsonname"
	"github.com/wtx-dev/wtx/internal/state"
	"github.com/wtx-dev/wtx/internal/tree"
)

// This file holds every type that records an op: the public Op, the
// opRecord the journal carries and the database keeps (its row and its
// receipt), and the JSON body of that row (opBody, opChange, entryJSON),
// with its byte-safe encoding of names.

// opRecord is what an op leaves in the database; the journal carries it so
// that recovery can record an op that committed just before a crash.
type opRecord struct {
	Op      state.Op `json:"op"`
	Receipt Receipt  `json:"receipt"`
	// Step is the op's Annotation (ApplyOptions.Annotate), as its recorder
	// reads it: recordOp writes it in the op's transaction, so a recovered
	// op records it too. Its field is named for the one kind there is.
	Step json.RawMessage `json:"flow_step,omitempty"`
	// Signed is the receipt as stored: its signed envelope, made before
	// the journal is written, so that an op that commits always has its
	// signed receipt (a journal written without it has it signed when
	// recovery records the op).
	Signed json.RawMessage `json:"signed_receipt,omitempty"`
}

// opBody is what the ops table keeps about an op: enough to show it and to
// undo it.
type opBody struct {
	Stage           string     `json:"stage"`
	Paths           []string   `json:"paths"`
	Written         []string   `json:"written"`
	ChangesetDigest string     `json:"changeset_digest"`
	Changes         []opChange `json:"changes"`
	// Undoes names the op an undo reversed.
	Undoes string `json:"undoes,omitempty"`
	// Exclude holds the exclude selectors of the apply or undo.
	Exclude []string `json:"exclude,omitempty"`
}

// opChange is one path an op wrote: its pre-image and post-image.
type opChange struct {
	Path string     `json:"path"`
	Old  *entryJSON `json:"old"`
	New  *entryJSON `json:"new"`
}

type entryJSON struct {
	Type   string `json:"type"`
	Perm   uint32 `json:"perm"`
	Size   int64  `json:"size"`
	Digest string `json:"digest,omitempty"`
	Target string `json:"target,omitempty"`
}

func toEntryJSON(e *tree.Entry) *entryJSON {
	if e == nil {
		return nil
	}
	return &entryJSON{Type: e.Type.String(), Perm: e.Perm, Size: e.Size, Digest: e.Digest, Target: e.Target}
}

func fromEntryJSON(p string, j *entryJSON) *tree.Entry {
	if j == nil {
		return nil
	}
	t := map[string]tree.Type{"file": tree.File, "dir": tree.Dir, "symlink": tree.Symlink}[j.Type]
	return &tree.Entry{Path: p, Type: t, Perm: j.Perm, Size: j.Size, Digest: j.Digest, Target: j.Target}
}

func opChanges(cs []tree.Change) []opChange {
	out := make([]opChange, len(cs))
	for i, c := range cs {
		out[i] = opChange{Path: c.Path, Old: toEntryJSON(c.Old), New: toEntryJSON(c.New)}
	}
	return out
}

// opRecord prepares the op row and receipt of an apply before it runs, so
// that they can travel in the journal.
func (s *Stage) opRecord(opID string, cs *ChangeSet, opts ApplyOptions, res *ApplyResult, todo, already []tree.Change) (*opRecord, error) {
	body, err := json.Marshal(opBody{Stage: s.ID(), Paths: nonNil(opts.Paths), Exclude: opts.Exclude, Written: nonNil(res.Written),
		ChangesetDigest: cs.Digest, Changes: opChanges(todo)})
	if err != nil {
		return nil, AsError(err)
	}
	now := s.ws.now().UTC()
	r := s.newReceipt("apply", cs)
	r.OpID = opID
	who := s.applier(opts)
	r.Approved, r.Actor = approves(who, opts.Approve), who.String()
	r.ProtectedPaths = s.protectedCount(todo)
	r.Paths = append(r.Paths, opts.Paths...)
	r.ResultDigest = tree.ResultDigest(cs.base.Entries, append(append([]tree.Change(nil), todo...), already...))
	rec := &opRecord{
		Op:      state.Op{ID: opID, WorkspaceID: s.ws.id, StageID: s.ID(), Kind: "apply", State: "committed", Body: body, CreatedAt: now},
		Receipt: r,
	}
	op := AppliedOp{OpID: opID, Stage: s.ID(), Written: append([]string(nil), res.Written...), ChangesetDigest: cs.Digest,
		Counts: cs.Counts, ResultDigest: r.ResultDigest, Receipt: r.ID, NotTransactional: r.NotTransactional}
	if err := annotate(opts, op, rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// Op is one applied batch as the journal of ops records it.
type Op struct {
	ID       string    `json:"op_id"`
	Kind     string    `json:"kind"` // "apply" or "undo"
	Tx       string    `json:"tx"`
	Created  time.Time `json:"created"`
	Written  []string  `json:"written" jsonname:"b64"`
	Changes  []Change  `json:"changes"`
	Undoes   string    `json:"undoes,omitempty"`
	UndoneBy string    `json:"undone_by,omitempty"`
	// PartlyUndoneBy names the undos that took back part of the op (undo
	// with paths), while some of its paths are still as it wrote them.
	PartlyUndoneBy []string `json:"partly_undone_by,omitempty"`
	body           opBody
	// takenBack maps each path of the op that a live undo took back (an
	// undo not itself undone) to the newest such undo.
	takenBack map[string]string
	workspace *Workspace
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

type opBodyJSON struct {
	Stage           string     `json:"stage"`
	Paths           []string   `json:"paths"`
	PathsB64        []string   `json:"paths_b64,omitempty"`
	Written         []string   `json:"written"`
	WrittenB64      []string   `json:"written_b64,omitempty"`
	ChangesetDigest string     `json:"changeset_digest"`
	Changes         []opChange `json:"changes"`
	Undoes          string     `json:"undoes,omitempty"`
	Exclude         []string   `json:"exclude,omitempty"`
	ExcludeB64      []string   `json:"exclude_b64,omitempty"`
}

// MarshalJSON writes the body with byte-safe paths.
func (b opBody) MarshalJSON() ([]byte, error) {
	return json.Marshal(opBodyJSON{b.Stage, jsonname.Texts(b.Paths), jsonname.B64s(b.Paths), jsonname.Texts(b.Written), jsonname.B64s(b.Written),
		b.ChangesetDigest, b.Changes, b.Undoes, jsonname.Texts(b.Exclude), jsonname.B64s(b.Exclude)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (b *opBody) UnmarshalJSON(data []byte) error {
	var j opBodyJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	paths, err := jsonname.Names(j.Paths, j.PathsB64)
	if err != nil {
		return fmt.Errorf("paths: %w", err)
	}
	written, err := jsonname.Names(j.Written, j.WrittenB64)
	if err != nil {
		return fmt.Errorf("written: %w", err)
	}
	exclude, err := jsonname.Names(j.Exclude, j.ExcludeB64)
	if err != nil {
		return fmt.Errorf("exclude: %w", err)
	}
	*b = opBody{j.Stage, paths, written, j.ChangesetDigest, j.Changes, j.Undoes, exclude}
	return nil
}

type opChangeJSON struct {
	Path    string     `json:"path"`
	PathB64 string     `json:"path_b64,omitempty"`
	Old     *entryJSON `json:"old"`
	New     *entryJSON `json:"new"`
}

// MarshalJSON writes the change with a byte-safe path.
func (c opChange) MarshalJSON() ([]byte, error) {
	return json.Marshal(opChangeJSON{jsonname.Text(c.Path), jsonname.B64(c.Path), c.Old, c.New})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (c *opChange) UnmarshalJSON(data []byte) error {
	var j opChangeJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	p, err := jsonname.Name(j.Path, j.PathB64)
	if err != nil {
		return err
	}
	*c = opChange{p, j.Old, j.New}
	return nil
}

type entryJSONJSON struct {
	Type      string `json:"type"`
	Perm      uint32 `json:"perm"`
	Size      int64  `json:"size"`
	Digest    string `json:"digest,omitempty"`
	Target    string `json:"target,omitempty"`
	TargetB64 string `json:"target_b64,omitempty"`
}

// MarshalJSON writes the entry with a byte-safe target.
func (e entryJSON) MarshalJSON() ([]byte, error) {
	return json.Marshal(entryJSONJSON{e.Type, e.Perm, e.Size, e.Digest, jsonname.Text(e.Target), jsonname.B64(e.Target)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (e *entryJSON) UnmarshalJSON(data []byte) error {
	var j entryJSONJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	target, err := jsonname.Name(j.Target, j.TargetB64)
	if err != nil {
		return err
	}
	*e = entryJSON{j.Type, j.Perm, j.Size, j.Digest, target}
	return nil
}
