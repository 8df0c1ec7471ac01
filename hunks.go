package wtx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/stage"
	"github.com/wtx-dev/wtx/internal/textdiff"
	"github.com/wtx-dev/wtx/internal/tree"
)

// HunkContext is the number of unchanged lines around each change in a
// hunk. Hunk numbers depend on it: they are the hunks of a diff with this
// much context, as wtx diff prints them.
const HunkContext = 3

// FileDiff is one path of a change set rendered for review: the git-style
// header and, for a text file, its hunks.
type FileDiff struct {
	// Change is the path's change.
	Change Change
	// Header holds the "diff --git" line and what follows it up to the
	// first hunk (mode lines, "---" and "+++", or a binary marker). Empty
	// for a change that is not rendered (a directory).
	Header string
	// Hunks are the hunks in diff order, each starting with its "@@" line.
	// Hunk n (numbered from 1) is Hunks[n-1].
	Hunks []string
	// Hunkable is set when single hunks of the path can be applied: a text
	// file modified on both sides.
	Hunkable bool
	// Unavailable is set when the base content is gone (its workspace copy
	// changed since the stage opened), so nothing could be rendered.
	Unavailable bool
}

// FileDiffs renders every change of cs (a change set of s, as Changes
// returned it) for review, in path order.
func (s *Stage) FileDiffs(ctx context.Context, cs *ChangeSet) ([]FileDiff, error) {
	fds, unavailable, err := s.fileDiffs(ctx, cs)
	if err != nil {
		return nil, err
	}
	byPath := make(map[string]textdiff.FileDiff, len(fds))
	for _, fd := range fds {
		byPath[fd.Path] = fd
	}
	gone := make(map[string]bool, len(unavailable))
	for _, p := range unavailable {
		gone[p] = true
	}
	out := make([]FileDiff, 0, len(cs.changes))
	for i := range cs.changes {
		c := &cs.changes[i]
		d := FileDiff{Change: cs.Changes[i], Unavailable: gone[c.Path]}
		if fd, ok := byPath[c.Path]; ok {
			var buf bytes.Buffer
			if err := textdiff.WriteGitOptions(&buf, fd, textdiff.Options{Context: HunkContext}); err != nil {
				return nil, err
			}
			d.Header, d.Hunks = splitHunks(buf.String())
			d.Hunkable = hunkable(c) && len(d.Hunks) > 0 && !textdiff.IsBinary(fd.Old) && !textdiff.IsBinary(fd.New)
		}
		out = append(out, d)
	}
	return out, nil
}

// splitHunks cuts one file's git diff into its header and its hunks. Only
// a hunk header starts with "@@": every line of hunk content starts with
// ' ', '+', '-' or '\'.
func splitHunks(diff string) (string, []string) {
	lines := strings.SplitAfter(diff, "\n")
	var header strings.Builder
	var hunks []string
	var cur *strings.Builder
	for _, l := range lines {
		if strings.HasPrefix(l, "@@ ") {
			if cur != nil {
				hunks = append(hunks, cur.String())
			}
			cur = &strings.Builder{}
		}
		if cur != nil {
			cur.WriteString(l)
		} else {
			header.WriteString(l)
		}
	}
	if cur != nil {
		hunks = append(hunks, cur.String())
	}
	return header.String(), hunks
}

// hunkable reports whether single hunks of c may be applied: a regular
// file on both sides.
func hunkable(c *tree.Change) bool {
	return c.Action == tree.Modified && c.Old != nil && c.New != nil &&
		c.Old.Type == tree.File && c.New.Type == tree.File
}

// LiteralSelector returns the selector that matches exactly the path p
// (and what is beneath it), escaping the wildcard characters p holds.
func LiteralSelector(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ { // by byte: a name need not be UTF-8
		if c := p[i]; c == '*' || c == '?' || c == '[' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// Select narrows an already computed change set to the paths that sels
// match, without scanning the view again: the digest it reports is the one
// an apply of those selectors checks with ApplyOptions.Expect.
func (cs *ChangeSet) Select(paths []string) (*ChangeSet, error) {
	sels, err := parsePaths(paths)
	if err != nil {
		return nil, err
	}
	var special []string
	for _, p := range cs.Special {
		if len(sels) == 0 || sels.Match(p) {
			special = append(special, p)
		}
	}
	out := newChangeSet(tree.Select(cs.changes, sels), cs.base, cs.view, special)
	out.all = cs.all
	return out, nil
}

// narrowHunks replaces, in the selection of cs, the change of every path
// named in hunks by a change to the base content with only the chosen
// hunks applied (numbered from 1, as wtx diff numbers them). The partial
// content is stored in the blob store; the returned set names the paths
// whose payload is such a blob rather than the staged file.
func (s *Stage) narrowHunks(ctx context.Context, cs *ChangeSet, hunks map[string][]int) (*ChangeSet, map[string]bool, error) {
	if len(hunks) == 0 {
		return cs, nil, nil
	}
	index := make(map[string]int, len(cs.changes))
	for i := range cs.changes {
		index[cs.changes[i].Path] = i
	}
	// A key names a path of the change set, or is the --path selector
	// that names one: a\[1] selects the file a[1], which the key itself
	// does not spell.
	byPath := make(map[string][]int, len(hunks))
	for k, nums := range hunks {
		p, err := hunkTarget(k, cs.changes, index)
		if err != nil {
			return nil, nil, errorf(CodeUsage, "--hunks %s: %v (stage %s)", quote.Path(k), err, s.ID())
		}
		byPath[p] = append(byPath[p], nums...)
	}
	hunks = byPath
	paths := make([]string, 0, len(hunks))
	for p := range hunks {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	v, err := s.view(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer v.Close()
	root, err := s.ws.openRoot()
	if err != nil {
		return nil, nil, AsError(err)
	}
	defer root.Close()
	changes := append([]tree.Change(nil), cs.changes...)
	partial := map[string]bool{}
	for _, p := range paths {
		i, ok := index[p]
		if !ok {
			return nil, nil, errorf(CodeUsage, "--hunks %s: the path is not a change of the selection of %s", p, s.ID())
		}
		c, err := s.partialChange(ctx, v, root, &changes[i], hunks[p])
		if err != nil {
			return nil, nil, err
		}
		if c.New != changes[i].New {
			partial[p] = true
		}
		changes[i] = c
	}
	out := newChangeSet(changes, cs.base, cs.view, cs.Special)
	out.all = cs.all
	return out, partial, nil
}

// partialChange returns c with only the chosen hunks of its diff applied
// to its base content. When every hunk is chosen, c is returned as is.
func (s *Stage) partialChange(ctx context.Context, v stage.View, root *fsx.Root, c *tree.Change, chosen []int) (tree.Change, error) {
	if !hunkable(c) {
		return tree.Change{}, errorf(CodeUsage, "--hunks %s: only a text file modified in the stage can be applied hunk by hunk (this is %s)", c.Path, describeChange(c))
	}
	if len(chosen) == 0 {
		return tree.Change{}, errorf(CodeUsage, "--hunks %s: no hunk chosen", c.Path)
	}
	old, ok, err := s.baseContent(root, c.Old)
	if err != nil {
		return tree.Change{}, err
	}
	if !ok {
		return tree.Change{}, &Error{Code: CodeTargetChanged,
			Message:   fmt.Sprintf("--hunks %s: its workspace copy changed since %s opened, so its hunks cannot be applied", c.Path, s.ID()),
			Conflicts: []Conflict{{Path: c.Path, Kind: "modified", Base: c.Old.Digest}}}
	}
	staged, err := s.stagedContent(v, c.New)
	if err != nil {
		return tree.Change{}, err
	}
	if textdiff.IsBinary(old) || textdiff.IsBinary(staged) {
		return tree.Change{}, errorf(CodeUsage, "--hunks %s: a binary file has no hunks; apply it whole with --path", c.Path)
	}
	hs := textdiff.Diff(old, staged, HunkContext)
	seen := map[int]bool{}
	sel := make([]int, 0, len(chosen))
	for _, n := range chosen {
		if n < 1 || n > len(hs) {
			return tree.Change{}, errorf(CodeUsage, "--hunks %s: no hunk %d (the file has %d; see 'wtx diff --hunks --path %s')", c.Path, n, len(hs), c.Path)
		}
		if !seen[n] {
			seen[n] = true
			sel = append(sel, n-1)
		}
	}
	sort.Ints(sel)
	if len(sel) == len(hs) && c.New.Perm == c.Old.Perm {
		return *c, nil
	}
	data, err := textdiff.Apply(old, hs, sel)
	if err != nil {
		return tree.Change{}, AsError(fmt.Errorf("apply hunks of %s: %w", c.Path, err))
	}
	d, n, err := s.ws.blobs.Put(ctx, bytes.NewReader(data))
	if err != nil {
		return tree.Change{}, AsError(fmt.Errorf("store partial %s: %w", c.Path, err))
	}
	if string(d) != string(blob.Sum(data)) {
		return tree.Change{}, errorf(CodeInternal, "store partial %s: digest mismatch", c.Path)
	}
	// The file keeps its base permission bits: a mode change lands only
	// with the whole file.
	e := &tree.Entry{Path: c.Path, Type: tree.File, Perm: c.Old.Perm, Size: n, Digest: string(d)}
	return tree.Change{Path: c.Path, Action: tree.Modified, Old: c.Old, New: e}, nil
}

func describeChange(c *tree.Change) string {
	switch {
	case c.Old == nil:
		return "an addition"
	case c.New == nil:
		return "a deletion"
	case c.Old.Type != c.New.Type:
		return "a type change"
	}
	return "a " + c.New.Type.String()
}

// hunkTarget returns the path of changes that key names: the path itself,
// or the only file change a selector key matches.
func hunkTarget(key string, changes []tree.Change, index map[string]int) (string, error) {
	if _, ok := index[key]; ok {
		return key, nil
	}
	sel, err := tree.ParseSelector(key)
	if err != nil {
		return "", err
	}
	var found []string
	for i := range changes {
		c := &changes[i]
		if sel.Match(c.Path) && (c.New == nil || c.New.Type != tree.Dir) {
			found = append(found, c.Path)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", errors.New("the path is not a change of the selection")
	}
	return "", fmt.Errorf("the selector names %d changed files, not one", len(found))
}
