package wtx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/tree"
)

// staleReads returns the reads of the stage whose workspace copy no longer
// holds what the read returned. Paths the stage changes are left out: drift
// covers them.
func (s *Stage) staleReads(ctx context.Context, root *fsx.Root, changes []tree.Change) ([]Conflict, error) {
	reads, err := s.ws.db.ReadSet(ctx, s.ID())
	if err != nil {
		return nil, AsError(err)
	}
	changed := make(map[string]bool, len(changes))
	for i := range changes {
		changed[changes[i].Path] = true
	}
	var out []Conflict
	for _, r := range reads {
		if changed[r.Path] {
			continue
		}
		cur, err := workspaceDigest(root, r.Path)
		if err != nil {
			return nil, err
		}
		if cur != r.Digest {
			out = append(out, Conflict{Path: r.Path, Kind: "stale-read", Base: r.Digest, Current: cur,
				Detail: fmt.Sprintf("read by op %d; the workspace copy changed since", r.Seq)})
		}
	}
	return out, nil
}

// workspaceDigest hashes the workspace file at rel ("absent", or the type
// for what is not a regular file).
func workspaceDigest(root *fsx.Root, rel string) (string, error) {
	d, err := root.OpenDir(tree.Parent(rel))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fsx.ErrNotDir) {
			return "absent", nil
		}
		if errors.Is(err, fsx.ErrSymlink) {
			return "symlink", nil
		}
		return "", AsError(err)
	}
	defer d.Close()
	f, err := d.OpenFile(tree.Base(rel))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "absent", nil
	case errors.Is(err, fsx.ErrSymlink), errors.Is(err, fsx.ErrNotRegular):
		return "not-a-file", nil
	case err != nil:
		return "", AsError(err)
	}
	defer f.Close()
	h := blob.NewHasher()
	if _, err := io.Copy(h, f); err != nil {
		return "", AsError(err)
	}
	return string(h.Digest()), nil
}

func staleReadError(s *Stage, stale []Conflict) *Error {
	return &Error{Code: CodeStaleRead,
		Message:   fmt.Sprintf("%d file(s) that %s read changed in the workspace since; first: %s", len(stale), s.ID(), quote.Path(stale[0].Path)),
		Conflicts: stale,
		Repairs: []Repair{
			{Action: "re-read", Detail: "read the file again and check the stage's changes still hold", Command: fmt.Sprintf("wtx read --tx %s -- %s", s.ID(), shellQuote(stale[0].Path))},
			{Action: "rebase", Detail: "re-run the stage's edits on the current workspace", Command: "wtx rebase " + s.ID()},
			{Action: "ignore", Detail: "apply anyway", Command: "wtx apply " + s.ID() + " --ignore-stale-reads"},
		}}
}

func readAllLimit(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, AsError(err)
	}
	return data, nil
}

func fsFileMode(perm uint32) fs.FileMode { return fs.FileMode(perm) & fs.ModePerm }
