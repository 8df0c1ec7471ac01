package wtx

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/wtx-dev/wtx/internal/quote"

	"github.com/wtx-dev/wtx/internal/tree"
)

// appliedIn answers the path selectors of an apply that matched nothing in
// the change set: a selector that matches a path an earlier apply of this
// stage wrote (an op not undone since) names what is already applied, and
// the ops that applied it are returned. Any other unmatched selector
// refuses the apply (not-found.path), as git refuses a pathspec that
// matches no file.
func (s *Stage) appliedIn(ctx context.Context, cs *ChangeSet) ([]string, error) {
	if len(cs.Unmatched) == 0 {
		return nil, cs.CheckMatched(s.ID())
	}
	ops, err := s.ws.Ops(ctx)
	if err != nil {
		return nil, err
	}
	var in []string
	var rest []UnmatchedSelector
	for _, u := range cs.Unmatched {
		sel, err := tree.ParseSelector(u.Selector)
		if u.Kind != SelectorPath || err != nil {
			rest = append(rest, u)
			continue
		}
		hit := false
		for _, op := range ops {
			if op.Tx != s.ID() || op.Kind != "apply" || op.UndoneBy != "" {
				continue
			}
			if slices.ContainsFunc(op.Written, sel.Match) {
				hit = true
				if !slices.Contains(in, op.ID) {
					in = append(in, op.ID)
				}
			}
		}
		if !hit {
			rest = append(rest, u)
		}
	}
	if len(rest) > 0 {
		sub := *cs
		sub.Unmatched = rest
		return nil, sub.CheckMatched(s.ID())
	}
	return in, nil
}

// appliedOps lists the ops that applied part of the stage and are not
// undone, oldest first.
func (s *Stage) appliedOps(ctx context.Context) []string {
	ops, err := s.ws.Ops(ctx)
	if err != nil {
		return nil
	}
	var out []string
	for _, op := range ops {
		if op.Tx == s.ID() && op.Kind == "apply" && op.UndoneBy == "" {
			out = append(out, op.ID)
		}
	}
	return out
}

// ProtectReason says why a path is protected.
type ProtectReason string

// Reasons a path is protected.
const (
	// ProtectGit: the path is or lies under a .git directory, protected by
	// default (hooks and configuration there run code).
	ProtectGit ProtectReason = "git"
	// ProtectSelector: the path matches a protect selector of the stage.
	ProtectSelector ProtectReason = "selector"
	// ProtectProject: the path is the project file, .wtx.toml, protected
	// by default (it sets the protects of every later stage).
	ProtectProject ProtectReason = "project"
	// ProtectUnknown: the record of the stage whose protects judge the path
	// is gone, so every path it would write needs approval.
	ProtectUnknown ProtectReason = "unknown"
)

// ProtectedPath is a path of a change set that an apply writes only when
// approved.
type ProtectedPath struct {
	Path   string
	Reason ProtectReason
	// Selector is what leaves the path out of an apply: the protect
	// selector it matches, or its .git directory as a literal selector.
	Selector string
}

// Detail says why the path is protected, for a person.
func (p ProtectedPath) Detail() string {
	switch p.Reason {
	case ProtectGit:
		return "under .git, protected by default"
	case ProtectProject:
		return "the project file " + ProjectFileName + ", protected by default"
	case ProtectUnknown:
		return "the record of its stage is gone, so what protects it cannot be known"
	}
	return "matches protect selector " + quote.Path(p.Selector)
}

// Protected lists the paths of cs that an apply writes only when approved,
// each with its reason.
func (s *Stage) Protected(cs *ChangeSet) []ProtectedPath {
	var out []ProtectedPath
	for i := range cs.changes {
		if pp, ok := s.protectedPath(cs.changes[i].Path); ok {
			out = append(out, pp)
		}
	}
	return out
}

func (s *Stage) protectedPath(p string) (ProtectedPath, bool) {
	return s.protection().of(p)
}

// protection is what protects the stage's paths: its protect selectors,
// the project file's as the gate last read them (liveProtection), and the
// defaults.
func (s *Stage) protection() protection {
	if len(s.live) == 0 {
		return protection{sels: s.protect}
	}
	return protection{sels: append(slices.Clip(s.protect), s.live...)}
}

// ExcludeSelectors are the distinct selectors that leave every path of pp
// out of an apply.
func ExcludeSelectors(pp []ProtectedPath) []string {
	var out []string
	for _, p := range pp {
		if !slices.Contains(out, p.Selector) {
			out = append(out, p.Selector)
		}
	}
	return out
}

// protectedError refuses an apply that touches protected paths: those under
// a protect selector of the stage, and those under a .git directory, which
// are protected by default (hooks and configuration there run code). Each
// conflict says which; the repairs approve the apply or leave the protected
// part out, where it stays staged.
func (s *Stage) protectedError(paths []string) *Error {
	var prot []Conflict
	var pps []ProtectedPath
	git, proj := false, false
	for _, p := range paths {
		pp, _ := s.protectedPath(p)
		pps = append(pps, pp)
		git = git || pp.Reason == ProtectGit
		proj = proj || pp.Reason == ProtectProject
		prot = append(prot, Conflict{Path: p, Kind: "protected", Detail: pp.Detail()})
	}
	msg := fmt.Sprintf("%d path(s) of %s are protected; they are written only when the apply is approved", len(prot), s.ID())
	if git {
		msg += " (.git is protected by default: hooks and configuration there run code)"
	}
	if proj {
		msg += " (" + ProjectFileName + " is protected by default: it sets what every later stage protects)"
	}
	var ex strings.Builder
	for _, r := range ExcludeSelectors(pps) {
		ex.WriteString(" --exclude " + shellQuote(r))
	}
	return &Error{Code: CodeProtected, Message: msg, Conflicts: prot,
		Repairs: []Repair{
			{Action: RepairApprove, Class: ClassProtected, Stage: s.ID(), Paths: paths, Detail: "apply the protected paths too", Command: "wtx apply " + s.ID() + " --approve"},
			{Action: RepairExclude, Class: ClassProtected, Stage: s.ID(), Paths: paths, Detail: "apply the rest; the protected paths stay staged", Command: "wtx apply " + s.ID() + ex.String()},
		}}
}

// gitRoot returns the .git directory p lies in (or is), as a literal
// selector.
func gitRoot(p string) (string, bool) {
	comps := strings.Split(p, "/")
	for i, c := range comps {
		if strings.EqualFold(c, ".git") {
			return LiteralSelector(strings.Join(comps[:i+1], "/")), true
		}
	}
	return "", false
}

// driftRepairs are the ways out of paths that changed in the workspace since
// the stage opened: carry the stage onto the workspace's current content
// (re-run its edits, or merge three-way), apply the rest without the drifted
// paths, or start again.
func driftRepairs(s *Stage, conflicts []Conflict) []Repair {
	var ex strings.Builder
	paths := make([]string, len(conflicts))
	for i, c := range conflicts {
		paths[i] = c.Path
	}
	class := ClassDrift
	if len(conflicts) > 0 {
		class = conflicts[0].Class()
	}
	for i, c := range conflicts {
		if i == 8 {
			ex.WriteString(" …")
			break
		}
		ex.WriteString(" --exclude " + shellQuote(LiteralSelector(c.Path)))
	}
	return []Repair{
		{Action: RepairRebase, Class: class, Stage: s.ID(), Detail: "carry the stage's edits onto the workspace's current content, then apply again", Command: "wtx rebase " + s.ID()},
		{Action: RepairRebaseMerge, Class: class, Stage: s.ID(), Detail: "merge the drifted files three-way (the stage's changes and the workspace's both land), then apply again", Command: "wtx rebase " + s.ID() + " --merge"},
		{Action: RepairExclude, Class: class, Stage: s.ID(), Paths: paths, Detail: "apply the rest; the drifted paths stay staged", Command: "wtx apply " + s.ID() + ex.String()},
		{Action: RepairRestage, Stage: s.ID(), Detail: "drop this stage and run the command again on the current workspace", Command: "wtx drop " + s.ID()},
	}
}

// undoChanges is the part of op's inverse an undo takes back: what sels
// select of it (all of it without selectors), less the paths earlier
// partial undos took back. A selector that selects no path of the op is
// refused (not-found.path); one whose paths were all taken back already is
// precondition.already-undone.
func (w *Workspace) undoChanges(ctx context.Context, op *Op, sels, excl tree.Selectors) ([]tree.Change, error) {
	inv := op.inverse()
	var none []UnmatchedSelector
	for _, k := range []struct {
		kind SelectorKind
		ss   tree.Selectors
	}{{SelectorPath, sels}, {SelectorExclude, excl}} {
		for _, sel := range k.ss {
			if !slices.ContainsFunc(inv, func(c tree.Change) bool { return sel.Match(c.Path) }) {
				none = append(none, UnmatchedSelector{Kind: k.kind, Selector: sel.String()})
			}
		}
	}
	if len(none) > 0 {
		ne := &NoMatchError{Tx: op.ID, Unmatched: none}
		return nil, &Error{Code: CodeNoMatch, Err: ne,
			Message: strings.Replace(ne.Error(), "matches no path of the change set of", "selects no path that was written by", 1),
			Repairs: []Repair{{Action: "show", Detail: "see the paths the op wrote", Command: "wtx show " + op.ID}}}
	}
	if sel := excludeChanges(tree.Select(inv, sels), excl); len(sel) == 0 && len(inv) > 0 {
		// Every selector matched a path of op, yet together they select
		// none: never "nothing to undo", which would claim the workspace
		// already holds what it held before.
		return nil, &Error{Code: CodeNoMatch,
			Message: fmt.Sprintf("the selection selects no path that was written by %s: every path its path selectors match is excluded", op.ID),
			Repairs: []Repair{{Action: "show", Detail: "see the paths the op wrote", Command: "wtx show " + op.ID}}}
	} else {
		inv = sel
	}
	done := op.takenBack // paths live undos took back already
	var out []tree.Change
	var by []string
	for _, c := range inv {
		if id, ok := done[c.Path]; ok {
			if !slices.Contains(by, id) {
				by = append(by, id)
			}
			continue
		}
		out = append(out, c)
	}
	if len(out) == 0 && len(by) > 0 {
		return nil, &Error{Code: CodeAlreadyUndone, Message: fmt.Sprintf("the selected paths of %s were already taken back by %s", op.ID, strings.Join(by, ", "))}
	}
	return out, nil
}

// undoRefusal refuses an undo whose paths changed since op wrote them.
// Each conflict names the latest op that wrote its path since, and the
// repairs undo those first or take back only the other paths.
func (w *Workspace) undoRefusal(ctx context.Context, op *Op, inverse []tree.Change, conflicts []Conflict, approved bool) *Error {
	ops, err := w.Ops(ctx)
	if err != nil {
		ops = nil
	}
	after := false
	var blockers []string
	for _, o := range ops {
		if o.ID == op.ID {
			after = true
			continue
		}
		if !after {
			continue
		}
		for i := range conflicts {
			if slices.Contains(o.Written, conflicts[i].Path) {
				conflicts[i].Op = o.ID
			}
		}
	}
	for i := range conflicts {
		if id := conflicts[i].Op; id != "" {
			conflicts[i].Detail = "written since by " + id
			if !slices.Contains(blockers, id) {
				blockers = append(blockers, id)
			}
		} else if conflicts[i].Detail == "" {
			conflicts[i].Detail = "changed in the workspace since, by no op of wtx"
		}
	}
	msg := fmt.Sprintf("%d path(s) written by %s changed since; undo would overwrite them, so nothing was changed; first: %s (%s)", len(conflicts), op.ID, quote.Path(conflicts[0].Path), conflicts[0].Kind)
	if conflicts[0].Op != "" {
		msg += ", written by " + conflicts[0].Op
	}
	var repairs []Repair
	for i := len(blockers) - 1; i >= 0; i-- { // the latest first
		repairs = append(repairs, Repair{Action: "undo-later", Detail: "undo the later op first, then this one", Command: "wtx undo " + blockers[i]})
	}
	var rest []string
	for _, c := range inverse {
		if !slices.ContainsFunc(conflicts, func(k Conflict) bool { return k.Path == c.Path || strings.HasPrefix(k.Path, c.Path+"/") }) {
			rest = append(rest, c.Path)
		}
	}
	if len(rest) > 0 {
		// Name the fewer: the paths to take back, or the changed ones to
		// leave out.
		var b strings.Builder
		if len(rest) <= len(conflicts) {
			for _, p := range rest {
				b.WriteString(" --path " + shellQuote(LiteralSelector(p)))
			}
		} else {
			for _, c := range conflicts {
				b.WriteString(" --exclude " + shellQuote(LiteralSelector(c.Path)))
			}
		}
		if approved {
			b.WriteString(" --approve") // what it writes was approved
		}
		repairs = append(repairs, Repair{Action: "undo-part", Detail: "take back only the paths that did not change", Command: "wtx undo " + op.ID + b.String()})
	}
	return &Error{Code: CodeTargetChanged, Message: msg, Conflicts: conflicts, Repairs: repairs}
}

// specialError refuses an apply whose selection holds FIFOs, sockets or
// devices, which wtx never applies; the repair leaves them out.
func specialError(s *Stage, special []string) *Error {
	var ex strings.Builder
	names := make([]string, len(special))
	for i, p := range special {
		names[i] = quote.Path(p)
		if i < 8 {
			ex.WriteString(" --exclude " + shellQuote(LiteralSelector(p)))
		}
	}
	return &Error{Code: CodeSpecialFile,
		Message: fmt.Sprintf("the stage holds %d FIFO, socket or device file(s), which wtx never applies: %s; remove them in the stage or leave them out of the apply", len(special), strings.Join(names, ", ")),
		Repairs: []Repair{{Action: "exclude", Detail: "apply the rest; they stay in the stage", Command: "wtx apply " + s.ID() + ex.String()}}}
}

// shellQuote writes a name as one POSIX shell word (quote.Shell).
func shellQuote(s string) string { return quote.Shell(s) }
