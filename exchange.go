package wtx

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"unicode/utf8"

	"github.com/wtx-dev/wtx/internal/bundle"
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/stage"
	"github.com/wtx-dev/wtx/internal/textdiff"
	"github.com/wtx-dev/wtx/internal/tree"
	"github.com/wtx-dev/wtx/receipt"
)

// ExportResult says what an export wrote.
type ExportResult struct {
	Tx              string `json:"tx"`
	ChangesetDigest string `json:"changeset_digest"`
	BaseDigest      string `json:"base_digest"`
	Counts          Counts `json:"counts"`
	Receipts        int    `json:"receipts"`
	// KeyID names the key that signed the export's receipt ("" when it
	// went unsigned): the key the receiving side trusts, or not.
	KeyID string `json:"key_id,omitempty"`
	// Bytes is the size of the bundle written (0 for a git export).
	Bytes int64 `json:"bytes"`
	// BundleDigest is the digest of the bundle's bytes.
	BundleDigest string `json:"bundle_digest,omitempty"`
	GitHead      string `json:"git_head,omitempty"`
	GitDirty     string `json:"git_dirty,omitempty"`
	// Ref and Commit name what a git export wrote.
	Ref    string `json:"ref,omitempty"`
	Commit string `json:"commit,omitempty"`
}

// ImportOptions configure an import.
type ImportOptions struct {
	// Name is an optional name for the new stage.
	Name string
	// Backend stages this workspace: "auto" (or empty), "overlay", "clone"
	// or "copy".
	Backend string
	// Protect selectors make an apply that touches them need approval.
	Protect []string
	// Require refuses (refusal.unverified) a change set that no receipt
	// signed (RequireSigned) or signed by a trusted key (RequireTrusted)
	// names.
	Require ProofRequirement
}

// ImportOrigin is what a stage made by import keeps of where its change
// set came from.
type ImportOrigin struct {
	FromTx        string `json:"from_tx"`
	FromName      string `json:"from_name,omitempty"`
	FromWorkspace string `json:"from_workspace"`
	// FromWorkspaceB64 is FromWorkspace's bytes when they are not UTF-8.
	FromWorkspaceB64 string            `json:"from_workspace_b64,omitempty"`
	GitHead          string            `json:"git_head,omitempty"`
	GitDirty         string            `json:"git_dirty,omitempty"`
	BaseDigest       string            `json:"base_digest"`
	ChangesetDigest  string            `json:"changeset_digest"`
	BundleDigest     string            `json:"bundle_digest,omitempty"`
	GitCommit        string            `json:"git_commit,omitempty"`
	Receipts         []json.RawMessage `json:"receipts"`
	// Keys are the signers' public keys the change set carried (base64
	// of the raw ed25519 key), carried on by a later export.
	Keys []string `json:"keys,omitempty"`
}

// ImportResult says what an import made.
type ImportResult struct {
	Tx      string       `json:"tx"`
	Name    string       `json:"name,omitempty"`
	Backend string       `json:"backend"`
	Origin  ImportOrigin `json:"origin"`
	// Proof says which receipt names the change set, which key signed it
	// and whether this side trusts that key.
	Proof ImportProof `json:"proof"`
	// ChangesetDigest is the stage's change set here. It is
	// Origin.ChangesetDigest (the one made and signed on the other side)
	// unless this workspace's excludes left entries out: LeftOut lists
	// them (a directory stands for what it holds), and they are never
	// part of the stage nor applied.
	ChangesetDigest string    `json:"changeset_digest"`
	LeftOut         []LeftOut `json:"left_out"`
	Counts          Counts    `json:"counts"`
	// GitHeadHere is this workspace's git HEAD ("" when it is not a git
	// repository); SameGitHead says whether it is the one the change set
	// was made on.
	GitHeadHere string `json:"git_head_here,omitempty"`
	SameGitHead bool   `json:"same_git_head"`
	// Drift lists the paths where this workspace does not hold the base the
	// change set was made on: an apply of them is refused.
	Drift []Conflict `json:"drift"`
}

// bundleOf collects the stage's change set as a bundle: every changed path
// with its base and new entry, the new content when withContent, the
// stage's receipts and where it was made.
func (s *Stage) bundleOf(ctx context.Context, withContent bool) (*bundle.Bundle, *ChangeSet, error) {
	if err := s.reload(ctx); err != nil {
		return nil, nil, err
	}
	if s.row.State != StateOpen {
		if err := s.checkUsable(); err != nil {
			return nil, nil, err
		}
	}
	// A command still running in the stage would change it under the
	// export: refused as for any command that reads the whole stage.
	release, err := s.holdShared(ctx, "export")
	if err != nil {
		return nil, nil, err
	}
	defer release()
	cs, err := s.Changes(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	v, err := s.view(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer v.Close()
	b := &bundle.Bundle{}
	if !withContent {
		b.Flags = bundle.FlagContentElsewhere
	}
	root, err := s.ws.openRoot()
	if err != nil {
		return nil, nil, AsError(err)
	}
	defer root.Close()
	var unknown, inGit []Conflict
	for i := range cs.changes {
		c := &cs.changes[i]
		if gitPath(c.Path) {
			inGit = append(inGit, Conflict{Path: c.Path, Kind: "protected", Detail: "a path in a .git directory never travels in a change set"})
			continue
		}
		e := bundle.Entry{Path: c.Path, Old: plainEntry(c.Old), New: plainEntry(c.New)}
		if e.Old != nil && e.Old.Type == tree.File && e.Old.Digest == "" {
			unknown = append(unknown, Conflict{Path: c.Path, Kind: "modified", Base: "unknown", Current: "changed",
				Detail: "the workspace copy changed since the stage opened, so its base is no longer known"})
			continue
		}
		if e.New != nil && e.New.Type == tree.File && withContent {
			data, err := s.stagedContent(v, c.New)
			if err != nil {
				return nil, nil, err
			}
			e.Content = data
			if e.Old != nil && e.Old.Type == tree.File && !textdiff.IsBinary(data) {
				// The original a merge on the other side needs, when it
				// is known here and text.
				if base, ok, err := s.baseContent(root, c.Old); err == nil && ok && !textdiff.IsBinary(base) {
					e.Base = base
				}
			}
		}
		b.Entries = append(b.Entries, e)
	}
	if len(inGit) > 0 {
		return nil, nil, &Error{Code: CodeProtected, Conflicts: inGit,
			Message: fmt.Sprintf("stage %s changes %d paths in a .git directory; a change set that travels never carries them", s.ID(), len(inGit))}
	}
	if len(unknown) > 0 {
		return nil, nil, &Error{Code: CodeTargetChanged, Conflicts: unknown,
			Message: fmt.Sprintf("%d paths changed in the workspace since stage %s opened; their base cannot be exported", len(unknown), s.ID())}
	}
	rows, err := s.ws.db.ReceiptsForStage(ctx, s.ID())
	if err != nil {
		return nil, nil, AsError(err)
	}
	if s.cfg.Import != nil {
		for _, r := range s.cfg.Import.Receipts {
			b.Receipts = append(b.Receipts, []byte(r))
		}
		b.Keys = decodeKeys(s.cfg.Import.Keys)
	}
	for _, r := range rows {
		b.Receipts = append(b.Receipts, []byte(r.Body))
	}
	body, key, err := s.exportReceipt(cs)
	if err != nil {
		return nil, nil, err
	}
	b.Receipts = append(b.Receipts, body)
	if key != nil && !slices.ContainsFunc(b.Keys, func(k []byte) bool { return bytes.Equal(k, key) }) {
		b.Keys = append(b.Keys, key)
	}
	head, dirty := gitIdentity(ctx, s.ws.path, cs.base)
	b.Origin = bundle.Origin{Stage: s.ID(), Name: s.Name(), Workspace: s.ws.path, GitHead: head, GitDirty: dirty,
		BaseDigest: tree.Digest(cs.base.Entries), ChangesetDigest: cs.Digest, ExportedAt: s.ws.now().UnixNano()}
	return b, cs, nil
}

// exportReceipt is the receipt an export signs: it names the change set
// exactly as it leaves (its digest, its base, the stage and workspace),
// which is what proves it on the other side (T-005). It is not kept here:
// it travels with the change set. key is the public key that signed it
// (nil when it went unsigned).
func (s *Stage) exportReceipt(cs *ChangeSet) (body, key []byte, err error) {
	r := s.newReceipt("export", cs)
	r.ResultDigest = viewDigest(cs)
	r.Digest = r.ComputeDigest()
	if body, err = s.ws.receiptBody(r); err != nil {
		return nil, nil, AsError(err)
	}
	rec, err := receipt.Decode(body)
	if err != nil || rec.Envelope == nil || len(rec.Envelope.Signatures) == 0 {
		return body, nil, nil
	}
	if priv, err := readReceiptKey(s.ws.stateDir); err == nil {
		pub := priv.Public().(ed25519.PublicKey)
		if receipt.KeyID(pub) == rec.Envelope.Signatures[0].KeyID { // the key that signed, not one made since
			key = pub
		}
	}
	return body, key, nil
}

// plainEntry is e without what only this machine knows (stat tuples).
func plainEntry(e *tree.Entry) *tree.Entry {
	if e == nil {
		return nil
	}
	p := &tree.Entry{Path: e.Path, Type: e.Type, Perm: e.Perm, Size: e.Size, Digest: e.Digest, Target: e.Target}
	switch e.Type {
	case tree.Dir:
		p.Size, p.Digest, p.Target = 0, "", ""
	case tree.Symlink:
		p.Perm, p.Size, p.Digest = 0, int64(len(e.Target)), ""
	case tree.File:
		p.Target = ""
	}
	return p
}

// Export writes the stage's change set to w as a bundle that Import takes
// on any machine: every changed path with its base (the drift baseline)
// and its new content, the stage's receipts, the workspace's git HEAD and
// a digest of its uncommitted files, all under one digest.
func (s *Stage) Export(ctx context.Context, w io.Writer) (*ExportResult, error) {
	b, cs, err := s.bundleOf(ctx, true)
	if err != nil {
		return nil, err
	}
	cw := &countingWriter{w: w, h: sha256.New()}
	if err := bundle.Encode(cw, b); err != nil {
		return nil, AsError(fmt.Errorf("write bundle: %w", err))
	}
	return &ExportResult{Tx: s.ID(), ChangesetDigest: cs.Digest, BaseDigest: b.Origin.BaseDigest, Counts: cs.Counts,
		Receipts: len(b.Receipts), KeyID: exportKeyID(b), Bytes: cw.n, BundleDigest: fmt.Sprintf("sha256:%x", cw.h.Sum(nil)),
		GitHead: b.Origin.GitHead, GitDirty: b.Origin.GitDirty}, nil
}

// exportKeyID names the key that signed b's export receipt (its last),
// "" when it is unsigned.
func exportKeyID(b *bundle.Bundle) string {
	if len(b.Receipts) == 0 {
		return ""
	}
	rec, err := receipt.Decode(b.Receipts[len(b.Receipts)-1])
	if err != nil || rec.Envelope == nil || len(rec.Envelope.Signatures) == 0 || rec.Receipt.Kind != "export" {
		return ""
	}
	return rec.Envelope.Signatures[0].KeyID
}

type countingWriter struct {
	w io.Writer
	h interface {
		io.Writer
		Sum([]byte) []byte
	}
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	_, _ = c.h.Write(p[:n]) // a hash.Hash never fails a write
	return n, err
}

// Import opens a stage on this workspace carrying the change set of the
// bundle read from r, with the bundle's base entries as its drift
// baseline: an apply is refused wherever this workspace no longer holds
// the base the change set was made on. A bundle that was altered
// anywhere is refused as io.corrupt before anything is created.
func (w *Workspace) Import(ctx context.Context, r io.Reader, opts ImportOptions) (*Stage, *ImportResult, error) {
	data, err := io.ReadAll(io.LimitReader(r, bundle.DefaultLimits.Compressed+1))
	if err != nil {
		return nil, nil, AsError(fmt.Errorf("read bundle: %w", err))
	}
	b, err := decodeBundle(data)
	if err != nil {
		return nil, nil, err
	}
	if b.Flags&bundle.FlagContentElsewhere != 0 {
		return nil, nil, errorf(CodeCorrupt, "this bundle carries no file content (it travels inside a git commit): import it with --git")
	}
	sum := sha256.Sum256(data)
	return w.importBundle(ctx, b, ImportOrigin{BundleDigest: fmt.Sprintf("sha256:%x", sum)}, opts)
}

func decodeBundle(data []byte) (*bundle.Bundle, error) {
	decode := bundle.Decode
	if failpoint.Disabled("bundle-digest") {
		decode = bundle.DecodeUnverified // negative control of X-002
	}
	b, err := decode(data, bundle.DefaultLimits)
	if err != nil {
		return nil, &Error{Code: CodeCorrupt, Message: "refusing the bundle: " + err.Error(), Err: err}
	}
	return b, nil
}

// importBundle makes the stage. Everything that can refuse the bundle
// itself runs before the stage is opened: its receipts are checked
// against its content and its signatures against the keys this side
// knows (T-005).
func (w *Workspace) importBundle(ctx context.Context, b *bundle.Bundle, origin ImportOrigin, opts ImportOptions) (*Stage, *ImportResult, error) {
	proof, err := w.proveBundle(b, opts.Require)
	if err != nil {
		return nil, nil, err
	}
	for _, body := range b.Receipts {
		origin.Receipts = append(origin.Receipts, json.RawMessage(body))
	}
	origin.Keys = encodeKeys(b.Keys)
	o := &b.Origin
	origin.FromTx, origin.FromName, origin.FromWorkspace = o.Stage, o.Name, o.Workspace
	if !utf8.ValidString(o.Workspace) {
		origin.FromWorkspace = quote.Path(o.Workspace)
		origin.FromWorkspaceB64 = base64.StdEncoding.EncodeToString([]byte(o.Workspace))
	}
	origin.GitHead, origin.GitDirty, origin.BaseDigest, origin.ChangesetDigest = o.GitHead, o.GitDirty, o.BaseDigest, o.ChangesetDigest
	if origin.Receipts == nil {
		origin.Receipts = []json.RawMessage{}
	}

	s, err := w.Begin(ctx, BeginOptions{Name: opts.Name, Backend: opts.Backend, Protect: opts.Protect})
	if err != nil {
		return nil, nil, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = s.Drop(context.WithoutCancel(ctx)) // the import failed; its error says why, a failed drop adds nothing
		}
	}()
	kept, leftOut := s.importable(b)
	for i := range kept.Entries {
		if kept.Entries[i].Base != nil {
			// Kept: the original a three-way merge (rebase --merge) needs.
			if _, err := w.blobs.PutBytes(ctx, kept.Entries[i].Base); err != nil {
				return nil, nil, AsError(err)
			}
		}
	}
	if err := s.fill(ctx, kept, &origin); err != nil {
		return nil, nil, err
	}
	st, err := s.Status(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	ok = true
	res := &ImportResult{Tx: s.ID(), Name: s.Name(), Backend: s.Backend(), Origin: origin, Proof: *proof,
		ChangesetDigest: st.ChangesetDigest, LeftOut: leftOut, Counts: st.Counts, Drift: st.Drift}
	if res.Drift == nil {
		res.Drift = []Conflict{}
	}
	res.GitHeadHere, _ = gitIdentity(ctx, w.path, nil)
	res.SameGitHead = res.GitHeadHere != "" && res.GitHeadHere == o.GitHead
	return s, res, nil
}

// importable splits b's entries by the stage's exclude and share
// selectors: what lies under them is never written into the view (an
// excluded path is no part of a stage; a shared one is the workspace's own
// copy) and is listed as left out, topmost entries only. The rest is
// returned as a bundle of its own.
func (s *Stage) importable(b *bundle.Bundle) (*bundle.Bundle, []LeftOut) {
	share, _ := tree.ParseSelectors(s.cfg.Share) // parsed when the stage was opened
	kept := *b
	kept.Entries = nil
	left := map[string]bool{}
	leftOut := []LeftOut{}
	for _, e := range b.Entries {
		if failpoint.Disabled("import-left-out") || (!s.exclude.Match(e.Path) && !share.Match(e.Path)) {
			kept.Entries = append(kept.Entries, e)
			continue
		}
		left[e.Path] = true
		under := false
		for p := tree.Parent(e.Path); p != "." && !under; p = tree.Parent(p) {
			under = left[p]
		}
		if under {
			continue
		}
		t := "file"
		if (e.New != nil && e.New.Type == tree.Dir) || (e.New == nil && e.Old.Type == tree.Dir) {
			t = "dir"
		}
		leftOut = append(leftOut, LeftOut{Path: e.Path, Type: t})
	}
	return &kept, leftOut
}

// fill writes the bundle's new entries into the stage's view and puts its
// base entries into the stage's manifest in place of this workspace's.
func (s *Stage) fill(ctx context.Context, b *bundle.Bundle, origin *ImportOrigin) error {
	release, err := s.holdShared(ctx, "import")
	if err != nil {
		return err
	}
	defer release()
	unlock, err := s.ws.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	v, err := s.view(ctx)
	if err != nil {
		return err
	}
	puts := make([]stage.Put, len(b.Entries))
	for i := range b.Entries {
		e := &b.Entries[i]
		puts[i] = stage.Put{Path: e.Path, New: e.New, Content: e.Content}
	}
	err = stage.Materialize(ctx, v, puts)
	v.Close()
	if err != nil {
		var msg string
		switch {
		case errors.Is(err, stage.ErrNotEmpty):
			msg = "a directory the change set removes holds more here than it did where the change set was made"
		case errors.Is(err, stage.ErrNoParent):
			msg = "a directory the change set was made in is missing here"
		case errors.Is(err, fsx.ErrSymlink):
			msg = "a directory the change set writes in is a symlink here"
		default:
			return stagingError(err)
		}
		return &Error{Code: CodeTargetChanged, Err: err,
			Message: fmt.Sprintf("this workspace does not hold the base the change set was made on: %s (%v)", msg, err)}
	}
	m, err := s.manifest()
	if err != nil {
		return err
	}
	touched := make(map[string]bool, len(b.Entries))
	for i := range b.Entries {
		touched[b.Entries[i].Path] = true
	}
	entries := m.Entries[:0:0]
	for _, e := range m.Entries {
		if !touched[e.Path] {
			entries = append(entries, e)
		}
	}
	for i := range b.Entries {
		if old := b.Entries[i].Old; old != nil && !failpoint.Disabled("import-base") {
			// No stat tuple: nothing here may prove this entry unchanged;
			// the workspace copy is hashed and compared at every check.
			entries = append(entries, tree.Entry{Path: old.Path, Type: old.Type, Perm: old.Perm, Size: old.Size,
				Digest: old.Digest, Target: old.Target})
		}
	}
	if failpoint.Disabled("import-base") {
		// negative control: the base is this workspace's own at import
		for _, e := range m.Entries {
			if touched[e.Path] {
				entries = append(entries, e)
			}
		}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Path < entries[j].Path })
	m.Entries = entries
	if err := s.ws.writeManifest(s.ID(), m); err != nil {
		return AsError(err)
	}
	s.cfg.Import = origin
	raw, err := json.Marshal(s.cfg)
	if err != nil {
		return AsError(err)
	}
	s.row.Config = raw
	s.row.UpdatedAt = s.ws.now().UTC()
	return AsErrorOrNil(s.ws.db.UpdateStage(ctx, s.row))
}

// Origin is where an imported stage's change set came from (nil for a
// stage made here).
func (s *Stage) Origin() *ImportOrigin { return s.cfg.Import }
