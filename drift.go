package wtx

import (
	"context"
	"errors"
	"io"
	"io/fs"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/jsonname"
	"github.com/wtx-dev/wtx/internal/textdiff"
	"github.com/wtx-dev/wtx/internal/tree"
)

// DriftEntry is one path that would block an apply because it moved in the
// workspace behind the stage's back: a changed path that drifted, or a
// file the stage read that changed since (a stale read).
type DriftEntry struct {
	Path string `json:"path" jsonname:"b64"`
	// Kind is the conflict's kind ("modified", "created", "deleted",
	// "type-changed", ...); Stale is set for a stale read.
	Kind  string `json:"kind"`
	Stale bool   `json:"stale_read,omitempty"`
	// Base is the digest the stage is based on (or read), Current the
	// workspace's now; "absent" when there is nothing.
	Base    string `json:"base"`
	Current string `json:"current"`
	// Shown is set when the diff holds the workspace's change for the
	// path: its base content is known (kept by wtx) and the current one
	// could be read. Otherwise Note says why not.
	Shown bool   `json:"shown"`
	Note  string `json:"note,omitempty"`
}

// MarshalJSON writes the entry with a byte-safe path.
func (d DriftEntry) MarshalJSON() ([]byte, error) { return jsonname.Marshal(d) }

// DriftUnknown is the base of a drift entry whose base digest was never
// taken (a lazy view hashes only what it must).
const DriftUnknown = "unknown"

// opBefore is the digest the stage's first op that touched p found there
// ("absent" when it found nothing), or "" when no op recorded it.
func opBefore(ops []TxOp, p string) string {
	for _, op := range ops {
		for _, f := range op.Files {
			if f.Path != p {
				continue
			}
			switch {
			case f.Before == nil:
				return "absent"
			case f.Before.Type == "file" && f.Before.Digest != "":
				return f.Before.Digest
			}
			return ""
		}
	}
	return ""
}

// Notes of a drift entry that has no diff.
const (
	DriftBaseUnknown = "the stage's base content of this path is not kept (only its digest): the workspace's change cannot be shown"
	DriftNotFile     = "not a regular file on both sides: only the digests are known"
	DriftBinary      = "binary content: only the digests are known"
)

// WriteDrift writes to w, for every path of the stage's selection (paths:
// selectors; all when empty) that blocks an apply because the workspace
// moved, the workspace's change since the stage's base as a git-style
// unified diff (a/ is the base, b/ the workspace now), where the base
// content is known; the entries say for which paths it is not. The stage
// and the workspace are only read.
func (s *Stage) WriteDrift(ctx context.Context, w io.Writer, paths []string, opts DiffOptions) ([]DriftEntry, error) {
	st, err := s.Status(ctx, paths)
	if err != nil {
		return nil, err
	}
	cs, err := s.Changes(ctx, paths)
	if err != nil {
		return nil, err
	}
	root, err := s.ws.openRoot()
	if err != nil {
		return nil, AsError(err)
	}
	defer root.Close()
	ops, err := s.TxOps(ctx)
	if err != nil {
		return nil, err
	}
	var out []DriftEntry
	seen := map[string]bool{}
	add := func(c Conflict, stale bool) error {
		if seen[c.Path] {
			return nil
		}
		seen[c.Path] = true
		e := DriftEntry{Path: c.Path, Kind: c.Kind, Stale: stale, Base: c.Base, Current: orAbsent(c.Current)}
		if e.Base == "" && !stale {
			// A drift conflict names what the workspace holds now; what the
			// stage is based on is in its base manifest, or, where the base
			// was not hashed (a lazy view), in what its first op found.
			if be := cs.base.Lookup(c.Path); be == nil {
				e.Base = "absent"
			} else if be.Type != tree.File {
				e.Base = be.Type.String()
			} else if be.Digest != "" {
				e.Base = be.Digest
			} else if d := opBefore(ops, c.Path); d != "" {
				e.Base = d
			} else {
				e.Base = DriftUnknown
			}
		}
		e.Base = orAbsent(e.Base)
		fd, note, err := s.driftDiff(root, cs, ops, e)
		if err != nil {
			return err
		}
		if note != "" {
			e.Note = note
		} else {
			e.Shown = true
			w := textdiff.NewColorWriter(w, opts.Color)
			if err := textdiff.WriteGitOptions(w, fd, textdiff.Options{Context: 3}); err != nil {
				return AsError(err)
			}
			if err := w.Flush(); err != nil {
				return AsError(err)
			}
		}
		out = append(out, e)
		return nil
	}
	for _, c := range st.Drift {
		if err := add(c, false); err != nil {
			return nil, err
		}
	}
	for _, c := range st.StaleReads {
		if err := add(c, true); err != nil {
			return nil, err
		}
	}
	return nonNil(out), nil
}

func orAbsent(d string) string {
	if d == "" {
		return "absent"
	}
	return d
}

// driftDiff builds the base→workspace diff of one drifted path, or says
// why there is none.
func (s *Stage) driftDiff(root *fsx.Root, cs *ChangeSet, ops []TxOp, e DriftEntry) (textdiff.FileDiff, string, error) {
	fd := textdiff.FileDiff{Path: e.Path}
	if e.Base == DriftUnknown {
		return fd, DriftBaseUnknown, nil
	}
	if e.Base != "absent" {
		if !isDigest(e.Base) {
			return fd, DriftNotFile, nil
		}
		data, ok, err := s.knownContent(e.Base)
		if err != nil {
			return fd, "", err
		}
		if !ok {
			return fd, DriftBaseUnknown, nil
		}
		fd.Old, fd.OldMode = data, textdiff.ModeFile
		if be := cs.base.Lookup(e.Path); be != nil && be.Type == tree.File {
			fd.OldMode = gitMode(be)
		} else if be != nil {
			return fd, DriftNotFile, nil
		}
	}
	if e.Current != "absent" {
		if !isDigest(e.Current) {
			return fd, DriftNotFile, nil
		}
		st, err := root.Lstat(e.Path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return fd, "the workspace's copy went away while it was read", nil
			}
			return fd, "", AsError(err)
		}
		if !st.Mode.IsRegular() {
			return fd, DriftNotFile, nil
		}
		data, err := s.ws.readWorkspaceFile(root, e.Path, e.Current)
		if err != nil {
			return fd, "", err
		}
		fd.New, fd.NewMode = data, textdiff.ModeFile
		if st.Mode.Perm()&0o111 != 0 {
			fd.NewMode = textdiff.ModeExec
		}
	}
	if textdiff.IsBinary(fd.Old) || textdiff.IsBinary(fd.New) {
		return fd, DriftBinary, nil
	}
	return fd, "", nil
}

// knownContent returns content by digest when wtx keeps it.
func (s *Stage) knownContent(digest string) ([]byte, bool, error) {
	d := blob.Digest(digest)
	if !s.ws.blobs.Has(d) {
		return nil, false, nil
	}
	data, err := s.ws.blobs.ReadAll(d)
	if err != nil {
		return nil, false, AsError(err)
	}
	return data, true, nil
}

func isDigest(d string) bool { return len(d) > 7 && d[:7] == "sha256:" }
