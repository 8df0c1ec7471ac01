package flow

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/tree"
)

// An agent step's allowlist bounds what lands (T-003), not what the
// proposal spells: an edit with all = true turns a few bytes of new text
// into a file of any size, and a write creates the directories above it.
// checkProposal checks each op as it is written; the checks here run on
// the ops' result.

// checkEditSize refuses, before it is staged, an edit of an agent's
// proposal whose result would be larger than max bytes: the result is
// never built.
func checkEditSize(ctx context.Context, s *wtx.Stage, it wtx.BatchItem, max int64) error {
	if it.Command != "edit" || it.New == nil || failpoint.Disabled("proposal-landed") {
		return nil
	}
	data, err := link().StagedFile(ctx, s, it.Path)
	if err != nil || data == nil {
		return err // a missing file fails the edit itself
	}
	n := int64(bytes.Count(data, []byte(it.Old)))
	if !it.All {
		n = min(n, 1)
	}
	if size := int64(len(data)) + n*(int64(len(*it.New))-int64(len(it.Old))); size > max {
		return &wtx.Error{Code: wtx.CodeProposalRefused,
			Conflicts: []wtx.Conflict{{Path: it.Path, Kind: "too-large", Detail: fmt.Sprintf("the edit makes it %d bytes, at most %d", size, max)}},
			Message:   fmt.Sprintf("the edit makes %s %d bytes, more than the step's allow.max_bytes (%d); nothing was applied", quote.Path(it.Path), size, max)}
	}
	return nil
}

// checkLanded checks what an agent's proposal made of the stage against the
// step's allowlist: every path it changed (before: the stage's change set
// before the proposal ran) matches allow.paths (a directory above one that
// does counts as matching), no file it leaves is larger than
// allow.max_bytes, and it changed at most allow.max_ops files.
func checkLanded(step *Step, before, after *wtx.ChangeSet) error {
	if failpoint.Disabled("proposal-landed") || step.Allow == nil {
		return nil
	}
	allow := step.Allow
	sels, _ := tree.ParseSelectors(allow.Paths) // checked with the definition
	landed := landedChanges(before, after)
	var files []string
	var conflicts []wtx.Conflict
	for _, c := range landed {
		e := c.New
		if e == nil {
			e = c.Old
		}
		if e != nil && e.Type == tree.Dir {
			if !sels.Match(c.Path) && !parentOfMatch(c.Path, landed, sels) {
				conflicts = append(conflicts, wtx.Conflict{Path: c.Path, Kind: "path-not-allowed", Detail: "a directory the proposal changed"})
			}
			continue
		}
		files = append(files, c.Path)
		if !sels.Match(c.Path) {
			conflicts = append(conflicts, wtx.Conflict{Path: c.Path, Kind: "path-not-allowed", Detail: "a path the proposal changed"})
		}
		if c.New != nil && c.New.Type == tree.File && c.New.Size > allow.MaxBytes {
			conflicts = append(conflicts, wtx.Conflict{Path: c.Path, Kind: "too-large", Detail: fmt.Sprintf("it lands as %d bytes, at most %d", c.New.Size, allow.MaxBytes)})
		}
	}
	if len(files) > allow.MaxOps {
		conflicts = append(conflicts, wtx.Conflict{Kind: "too-many-files", Detail: fmt.Sprintf("%d files changed, at most %d", len(files), allow.MaxOps)})
	}
	if len(conflicts) == 0 {
		return nil
	}
	return &wtx.Error{Code: wtx.CodeProposalRefused, Conflicts: conflicts,
		Message: fmt.Sprintf("agent step %s: what the proposal lands leaves the step's allowlist in %d way(s); first: %s (%s: %s); nothing was applied",
			step.Name, len(conflicts), quote.Path(conflicts[0].Path), conflicts[0].Kind, conflicts[0].Detail)}
}

// landedChanges are the changes of after that before did not hold as they
// are now, and the changes of before that after no longer holds (a path
// set back to its base is written too).
func landedChanges(before, after *wtx.ChangeSet) []tree.Change {
	was := map[string]*tree.Entry{}
	if before != nil {
		for _, c := range link().AllChanges(before) {
			was[c.Path] = c.New
		}
	}
	var out []tree.Change
	for _, c := range link().AllChanges(after) {
		old, ok := was[c.Path]
		delete(was, c.Path)
		if !ok || !sameEntry(old, c.New) {
			out = append(out, c)
		}
	}
	for p, e := range was {
		out = append(out, tree.Change{Path: p, Old: e})
	}
	tree.SortChanges(out)
	return out
}

func sameEntry(a, b *tree.Entry) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Type == b.Type && a.Perm == b.Perm && a.Size == b.Size && a.Digest == b.Digest && a.Target == b.Target
}

// parentOfMatch reports whether dir holds a landed path that sels match.
func parentOfMatch(dir string, landed []tree.Change, sels tree.Selectors) bool {
	for _, c := range landed {
		if strings.HasPrefix(c.Path, dir+"/") && sels.Match(c.Path) {
			return true
		}
	}
	return false
}

// agentProtected says of an agent step's apply refused for protected paths
// that no approval helps: a person writes them.
func agentProtected(step *Step, e *wtx.Error) *wtx.Error {
	var prot []wtx.Conflict
	for _, c := range e.Conflicts {
		if c.Class() == wtx.ClassProtected {
			prot = append(prot, c)
		}
	}
	first := ""
	if len(prot) > 0 {
		first = fmt.Sprintf("; first: %s (%s)", quote.Path(prot[0].Path), prot[0].Detail)
	}
	return &wtx.Error{Code: e.Code, Conflicts: e.Conflicts, Err: e,
		Message: fmt.Sprintf("agent step %s: its proposal writes %d protected path(s)%s; an agent step never writes a protected path, approved or not: a person does; nothing was applied", step.Name, len(prot), first),
		Repairs: []wtx.Repair{{Action: wtx.RepairPerson, Detail: "a person makes the change to the protected paths"}}}
}
