package wtx

import (
	"bytes"
	"context"
	"fmt"
	"sort"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/tree"
)

// A rebase with merge that meets lines both the stage and the workspace
// changed writes them into the stage between git's conflict markers (with
// the base section) and marks the path conflicted. A conflicted path is
// unresolved while its staged file still holds a marker line; apply
// refuses it until then. Resolve takes one side whole.

// markerLabels name the sides in the markers wtx writes.
var markerLabels = struct{ ours, base, theirs string }{"stage", "base", "workspace"}

// ConflictMark records a path a rebase left with conflict markers: the
// stage's content before the merge (Ours) and the workspace's (Theirs),
// both kept in the blob store for Resolve.
type ConflictMark struct {
	Path   []byte `json:"path"` // bytes: a path need not be UTF-8
	Ours   string `json:"ours"`
	Theirs string `json:"theirs"`
}

// hasMarkers reports whether data holds a conflict marker line.
func hasMarkers(data []byte) bool {
	for _, m := range [][]byte{[]byte("<<<<<<< "), []byte("||||||| "), []byte(">>>>>>> ")} {
		if bytes.HasPrefix(data, m) || bytes.Contains(data, append([]byte("\n"), m...)) {
			return true
		}
	}
	return false
}

// Conflicted lists the stage's paths a rebase left with conflict markers
// that are still in the staged file.
func (s *Stage) Conflicted(ctx context.Context) ([]string, error) {
	if len(s.cfg.Conflicted) == 0 {
		return nil, nil
	}
	v, err := s.view(ctx)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	var out []string
	for _, m := range s.cfg.Conflicted {
		p := string(m.Path)
		_, data, err := stagedFile(v, p)
		if err != nil {
			return nil, err
		}
		if data != nil && hasMarkers(data) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out, nil
}

// checkResolved refuses an apply of a selection that holds a path still
// conflicted.
func (s *Stage) checkResolved(ctx context.Context, cs []tree.Change) error {
	if len(s.cfg.Conflicted) == 0 || failpoint.Disabled("conflict-markers") {
		return nil
	}
	open, err := s.Conflicted(ctx)
	if err != nil {
		return err
	}
	selected := map[string]bool{}
	for i := range cs {
		selected[cs[i].Path] = true
	}
	var cfs []Conflict
	for _, p := range open {
		if selected[p] {
			cfs = append(cfs, Conflict{Path: p, Kind: "unresolved", Detail: "conflict markers from a rebase are still in the staged file"})
		}
	}
	if len(cfs) == 0 {
		return nil
	}
	return &Error{Code: CodeTargetChanged,
		Message:   fmt.Sprintf("%d path(s) of %s still hold conflict markers from a rebase; first: %s", len(cfs), s.ID(), quote.Path(cfs[0].Path)),
		Conflicts: cfs,
		Repairs: []Repair{
			{Action: RepairResolve, Detail: "edit the staged file to remove the markers, or take one side whole", Stage: s.ID(), Paths: conflictPaths(cfs)},
			{Action: RepairExclude, Detail: "apply the other paths only", Stage: s.ID(), Paths: conflictPaths(cfs)},
		}}
}

// Resolve sets a conflicted path's staged content to one side whole: the
// stage's content before the rebase (ours) or the workspace's (theirs). It
// is a per-file write of the stage, which drop-op can take back.
func (s *Stage) Resolve(ctx context.Context, path string, theirs bool) (*FileResult, error) {
	var mark *ConflictMark
	for i := range s.cfg.Conflicted {
		if string(s.cfg.Conflicted[i].Path) == path {
			mark = &s.cfg.Conflicted[i]
		}
	}
	if mark == nil {
		return nil, &Error{Code: CodeFileNotFound, Message: fmt.Sprintf("%s is not a path a rebase of %s left conflicted", quote.Path(path), s.ID())}
	}
	d := mark.Ours
	if theirs {
		d = mark.Theirs
	}
	data, err := s.ws.blobs.ReadAll(blob.Digest(d))
	if err != nil {
		return nil, AsError(err)
	}
	return s.Write(ctx, path, data, WriteOptions{})
}
