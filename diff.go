package wtx

import (
	"context"
	"fmt"
	"io"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/stage"
	"github.com/wtx-dev/wtx/internal/textdiff"
	"github.com/wtx-dev/wtx/internal/tree"
)

// DiffFormat chooses how WriteDiff renders a change set.
type DiffFormat int

// Diff formats.
const (
	// DiffPatch is a git-style unified diff that git apply accepts.
	DiffPatch DiffFormat = iota
	// DiffStat is a git diff --stat summary.
	DiffStat
	// DiffNameStatus is one "A|M|D<TAB>path" line per change.
	DiffNameStatus
)

// DiffOptions configure WriteDiff.
type DiffOptions struct {
	// Paths and Exclude select part of the change set, as an apply does;
	// a selector that matches no path of it is refused (not-found.path).
	Paths   []string
	Exclude []string
	Format  DiffFormat
	// Color adds ANSI colours like git does on a terminal.
	Color bool
	// Binary renders binary content as a git binary patch.
	Binary bool
	// Width is the terminal width for DiffStat (80 when 0).
	Width int
	// NumberHunks writes each hunk's number after its "@@ ... @@" header
	// ("hunk 1", "hunk 2", … per file), the numbers ApplyOptions.Hunks
	// takes.
	NumberHunks bool
}

// DiffResult is what WriteDiff rendered.
type DiffResult struct {
	Changes *ChangeSet
	// Unavailable lists modified or deleted files whose base content is no
	// longer available (their workspace copy changed since the stage opened),
	// left out of a patch.
	Unavailable []string
}

// WriteDiff renders the stage's change set (restricted to opts.Paths) to w.
func (s *Stage) WriteDiff(ctx context.Context, w io.Writer, opts DiffOptions) (*DiffResult, error) {
	cs, err := s.SelectChanges(ctx, Selection{Paths: opts.Paths, Exclude: opts.Exclude})
	if err != nil {
		return nil, err
	}
	if err := cs.CheckMatched(s.ID()); err != nil {
		return nil, err
	}
	res := &DiffResult{Changes: cs}
	if opts.Format == DiffNameStatus {
		for i := range cs.changes {
			c := &cs.changes[i]
			letter := map[tree.Action]string{tree.Added: "A", tree.Modified: "M", tree.Deleted: "D"}[c.Action]
			if c.Action == tree.Modified && c.Old.Type != c.New.Type {
				letter = "T"
			}
			p := quote.Path(c.Path) // I-007: a name never splits or rewrites its line
			if (c.New != nil && c.New.Type == tree.Dir) || (c.New == nil && c.Old.Type == tree.Dir) {
				p += "/"
			}
			if _, err := fmt.Fprintf(w, "%s\t%s\n", letter, p); err != nil {
				return nil, err
			}
		}
		return res, nil
	}
	// One file's contents at a time: a diff of many files never holds
	// them all.
	if opts.Format == DiffStat {
		width := opts.Width
		if width <= 0 {
			width = 80
		}
		rows := make([]textdiff.StatRow, 0, len(cs.changes))
		res.Unavailable, err = s.eachFileDiff(ctx, cs, func(fd textdiff.FileDiff) error {
			if r, ok := textdiff.StatOf(fd); ok {
				rows = append(rows, r)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		return res, textdiff.WriteStatRowsColor(w, rows, width, opts.Color)
	}
	out := io.Writer(w)
	var cw *textdiff.ColorWriter
	if opts.Color {
		cw = textdiff.NewColorWriter(w, true)
		out = cw
	}
	res.Unavailable, err = s.eachFileDiff(ctx, cs, func(fd textdiff.FileDiff) error {
		return textdiff.WriteGitOptions(out, fd, textdiff.Options{Context: HunkContext, Binary: opts.Binary, NumberHunks: opts.NumberHunks})
	})
	if err != nil {
		return nil, err
	}
	if cw != nil {
		if err := cw.Flush(); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func gitMode(e *tree.Entry) uint32 {
	if e == nil {
		return 0
	}
	switch e.Type {
	case tree.File:
		if e.Perm&0o100 != 0 {
			return textdiff.ModeExec
		}
		return textdiff.ModeFile
	case tree.Symlink:
		return textdiff.ModeSymlink
	}
	return 0
}

// fileDiffs loads both sides of every file and symlink change.
func (s *Stage) fileDiffs(ctx context.Context, cs *ChangeSet) ([]textdiff.FileDiff, []string, error) {
	var out []textdiff.FileDiff
	unavailable, err := s.eachFileDiff(ctx, cs, func(fd textdiff.FileDiff) error {
		out = append(out, fd)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return out, unavailable, nil
}

// eachFileDiff loads both sides of each file and symlink change in turn
// and passes them to fn, in path order; it keeps none of them. It returns
// the paths whose base content is no longer available (left out).
func (s *Stage) eachFileDiff(ctx context.Context, cs *ChangeSet, fn func(textdiff.FileDiff) error) ([]string, error) {
	v, err := s.view(ctx)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	root, err := s.ws.openRoot()
	if err != nil {
		return nil, AsError(err)
	}
	defer root.Close()
	var unavailable []string
	for i := range cs.changes {
		c := &cs.changes[i]
		s.ws.progress(PhaseDiff, i, len(cs.changes))
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		fd := textdiff.FileDiff{Path: c.Path, OldMode: gitMode(c.Old), NewMode: gitMode(c.New)}
		if fd.OldMode == 0 && fd.NewMode == 0 {
			continue // directories only
		}
		if fd.OldMode != 0 {
			old, ok, err := s.baseContent(root, c.Old)
			if err != nil {
				return nil, err
			}
			if !ok {
				unavailable = append(unavailable, c.Path)
				continue
			}
			fd.Old = old
		}
		switch {
		case c.New == nil:
		case c.New.Type == tree.Symlink:
			fd.New = []byte(c.New.Target)
		case c.New.Type == tree.File:
			data, err := s.stagedContent(v, c.New)
			if err != nil {
				return nil, err
			}
			fd.New = data
		}
		if err := fn(fd); err != nil {
			return nil, err
		}
	}
	return unavailable, nil
}

// stagedContent reads a staged file, checking it still has the digest the
// scan saw.
func (s *Stage) stagedContent(v stage.View, e *tree.Entry) ([]byte, error) {
	f, err := v.OpenFile(e.Path)
	if err != nil {
		return nil, stagingError(fmt.Errorf("read staged %s: %w", e.Path, err))
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, AsError(err)
	}
	if string(blob.Sum(data)) != e.Digest {
		return nil, &Error{Code: CodeUnstable, Message: fmt.Sprintf("staged file %s changed while it was read; try again", e.Path)}
	}
	return data, nil
}

// baseContent returns the base content of e: from the blob store when an
// earlier apply kept it, else from the workspace when it still matches.
func (s *Stage) baseContent(root *fsx.Root, e *tree.Entry) ([]byte, bool, error) {
	if e.Type == tree.Symlink {
		return []byte(e.Target), true, nil
	}
	if s.ws.blobs.Has(blob.Digest(e.Digest)) {
		data, err := s.ws.blobs.ReadAll(blob.Digest(e.Digest))
		return data, err == nil, nil
	}
	d, err := root.OpenDir(tree.Parent(e.Path))
	if err != nil {
		return nil, false, nil
	}
	defer d.Close()
	f, err := d.OpenFile(tree.Base(e.Path))
	if err != nil {
		return nil, false, nil
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil || string(blob.Sum(data)) != e.Digest {
		return nil, false, nil
	}
	return data, true, nil
}
