package wtx

import (
	"context"
	"fmt"
	"io"
	"io/fs"

	"github.com/wtx-dev/wtx/internal/engine"
	"github.com/wtx-dev/wtx/internal/fsx"
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
		cur, err := entryAt(ctx, root, r.Path, engine.ContentReader{})
		if err != nil {
			return nil, err
		}
		if !cur.HoldsFile(r.Digest) {
			out = append(out, Conflict{Path: r.Path, Kind: "stale-read", Base: r.Digest, Current: cur.String(),
				Detail: fmt.Sprintf("read by op %d; the workspace copy changed since", r.Seq)})
		}
	}
	return out, nil
}

func readAllLimit(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, AsError(err)
	}
	return data, nil
}

func fsFileMode(perm uint32) fs.FileMode { return fs.FileMode(perm) & fs.ModePerm }
