package wtx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/jsonname"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/stage"
	"github.com/wtx-dev/wtx/internal/tree"
)

// Side is one side of a change: what a path held.
type Side struct {
	Type   string `json:"type"`
	Mode   string `json:"mode,omitempty"`
	Size   int64  `json:"size"`
	Digest string `json:"digest,omitempty"`
	Target string `json:"target,omitempty" jsonname:"b64"`
}

// MarshalJSON writes the side with a byte-safe target (internal/jsonname).
func (s Side) MarshalJSON() ([]byte, error) { return jsonname.Marshal(s) }

// UnmarshalJSON reads what MarshalJSON writes (and records without
// target_b64).
func (s *Side) UnmarshalJSON(data []byte) error { return jsonname.Unmarshal(data, s) }

// Change is one path of a change set, as shown by status, diff and apply.
// A deleted path has no top-level type, mode or digest, only Before.
type Change struct {
	Path   string `json:"path" jsonname:"b64"`
	Action string `json:"action"`
	Type   string `json:"type,omitempty"`
	Mode   string `json:"mode,omitempty"`
	Size   *int64 `json:"size,omitempty"`
	Digest string `json:"digest,omitempty"`
	Target string `json:"target,omitempty" jsonname:"b64"`
	Before *Side  `json:"before,omitempty"`
}

// MarshalJSON writes the change with a byte-safe path and target.
func (c Change) MarshalJSON() ([]byte, error) { return jsonname.Marshal(c) }

// UnmarshalJSON reads what MarshalJSON writes.
func (c *Change) UnmarshalJSON(data []byte) error { return jsonname.Unmarshal(data, c) }

// Counts tallies a change set.
type Counts = tree.Counts

func sideOf(e *tree.Entry) Side {
	s := Side{Type: e.Type.String(), Size: e.Size}
	switch e.Type {
	case tree.File:
		s.Mode, s.Digest = e.ModeString(), e.Digest
	case tree.Dir:
		s.Mode, s.Size = e.ModeString(), 0
	case tree.Symlink:
		s.Target = e.Target
	}
	return s
}

func publicChange(c *tree.Change) Change {
	out := Change{Path: c.Path, Action: c.Action.String()}
	if c.New != nil {
		s := sideOf(c.New)
		size := s.Size
		out.Type, out.Mode, out.Size, out.Digest, out.Target = s.Type, s.Mode, &size, s.Digest, s.Target
	}
	if c.Old != nil {
		b := sideOf(c.Old)
		out.Before = &b
	}
	return out
}

func publicChanges(cs []tree.Change) []Change {
	out := make([]Change, len(cs))
	for i := range cs {
		out[i] = publicChange(&cs[i])
	}
	return out
}

// ChangeSet is a stage's change set, or the part of it a selection picks.
type ChangeSet struct {
	// Changes, sorted by path.
	Changes []Change
	// Digest binds an apply to this exact selection (apply --expect).
	Digest string
	// Counts of Changes by action.
	Counts Counts
	// Special lists paths in the view that hold FIFOs, sockets or devices,
	// which are never applied.
	Special []string
	// LeftOut lists what a command wrote under the stage's exclude
	// selectors: never part of the change set, never applied (I-008).
	LeftOut []LeftOut
	// RootMode is set when the view's root has another mode than the
	// workspace root had when the stage opened. wtx does not apply a
	// change to the root itself: it is reported, never part of Changes.
	RootMode *RootModeChange

	// Unmatched lists the selectors (paths, then excludes) that match no
	// path of the whole change set.
	Unmatched []UnmatchedSelector

	changes []tree.Change // the selection
	all     []tree.Change // the whole change set
	// emptied is set when every selector matched a path but together they
	// select none (--path X --exclude X): an error, as for a selector
	// that matches nothing.
	emptied bool
	base    *tree.Manifest
	view    []tree.Entry
}

// Changes computes the stage's change set (restricted to paths, selectors,
// when given) by scanning its view.
func (s *Stage) Changes(ctx context.Context, paths []string) (*ChangeSet, error) {
	return s.SelectChanges(ctx, Selection{Paths: paths})
}

// Selection picks part of a change set: what Paths select (everything when
// empty) minus what Exclude selects.
type Selection struct {
	Paths   []string
	Exclude []string
}

// SelectChanges computes the stage's change set, narrowed to sel. A
// selector of sel that matches no path of the whole change set is listed in
// the answer's Unmatched (CheckMatched makes that an error). Excluding a
// path keeps its deleted or replaced ancestor directories too: they cannot
// go while it stays.
func (s *Stage) SelectChanges(ctx context.Context, sel Selection) (*ChangeSet, error) {
	sels, err := parsePaths(sel.Paths)
	if err != nil {
		return nil, err
	}
	excl, err := parseExcludes(sel.Exclude)
	if err != nil {
		return nil, err
	}
	if s.row.State == StateDropped {
		return nil, s.checkUsable()
	}
	if s.row.State == StateApplied || s.row.State == StateEmpty {
		// wtx gc may have removed a settled stage's directory.
		m, err := s.manifest()
		if err != nil {
			m = &tree.Manifest{}
		}
		return newChangeSet(nil, m, nil, nil), nil
	}
	m, err := s.manifest()
	if err != nil {
		return nil, err
	}
	v, err := s.view(ctx)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	entries, err := v.Scan(ctx, m, s.exclude)
	if errors.Is(err, stage.ErrViewInDoubt) {
		return nil, &Error{Code: CodeStateLost, Message: fmt.Sprintf("stage %s: %v; nothing of it is applied", s.ID(), err), Err: err,
			Repairs: []Repair{{Action: RepairRestage, Stage: s.ID(), Detail: "drop this stage and run the command again"}}}
	}
	if err != nil {
		return nil, stagingError(err)
	}
	var special []string
	for i := range entries {
		if entries[i].Type == tree.Special {
			if b := m.Lookup(entries[i].Path); b == nil || b.Type != tree.Special {
				if (len(sels) == 0 || sels.Match(entries[i].Path)) && !excl.Match(entries[i].Path) {
					special = append(special, entries[i].Path)
				}
			}
		}
	}
	all := tree.Compare(m.Entries, entries)
	cs := newChangeSet(excludeChanges(tree.Select(all, sels), excl), m, entries, special)
	cs.all = all
	cs.Unmatched = unmatched(all, entries, m, sels, excl)
	cs.emptied = len(sels)+len(excl) > 0 && len(all) > 0 && len(cs.changes) == 0 && len(special) == 0 && len(cs.Unmatched) == 0
	cs.LeftOut = leftOutOf(v)
	cs.RootMode = s.rootModeChange(v)
	return cs, nil
}

// RootModeChange is a change of the workspace root's own mode made in a
// stage (permission bits).
type RootModeChange struct {
	Was, Now uint32
}

// Notice says what happened and that it is not applied.
func (r *RootModeChange) Notice() string {
	return fmt.Sprintf("the command changed the mode of the workspace root (%04o → %04o); wtx does not apply changes to the root itself", r.Was, r.Now)
}

// MarshalJSON writes the modes as octal text, with the notice.
func (r RootModeChange) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Was    string `json:"was"`
		Now    string `json:"now"`
		Notice string `json:"notice"`
	}{fmt.Sprintf("%04o", r.Was), fmt.Sprintf("%04o", r.Now), r.Notice()})
}

// rootModeChange compares the view's root with the workspace root's mode
// recorded at open. A stage opened before the mode was recorded, or a view
// that cannot tell, says nothing.
func (s *Stage) rootModeChange(v stage.View) *RootModeChange {
	rm, ok := v.(stage.RootModer)
	if s.cfg.RootMode == nil || !ok || failpoint.Disabled("root-mode") {
		return nil
	}
	now, err := rm.RootMode()
	if err != nil || now == *s.cfg.RootMode {
		return nil
	}
	return &RootModeChange{Was: *s.cfg.RootMode, Now: now}
}

func newChangeSet(cs []tree.Change, m *tree.Manifest, view []tree.Entry, special []string) *ChangeSet {
	sort.Strings(special)
	return &ChangeSet{
		Changes: publicChanges(cs),
		Digest:  tree.ChangesetDigest(cs),
		Counts:  tree.Count(cs),
		Special: special,
		changes: cs,
		base:    m,
		view:    view,
	}
}

// parsePaths turns --path arguments into selectors, refusing any that would
// leave the workspace.
func parsePaths(paths []string) (tree.Selectors, error) {
	var sels tree.Selectors
	for _, p := range paths {
		sel, err := tree.ParseSelector(p)
		if err != nil {
			code := CodeUsage
			if len(p) > 0 && (p[0] == '/' || containsDotDot(p) || containsNUL(p)) {
				code = CodeBoundary
			}
			return nil, &Error{Code: code, Message: fmt.Sprintf("--path %q: %v", p, err)}
		}
		sels = append(sels, sel)
	}
	return sels, nil
}

func containsNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return true
		}
	}
	return false
}

func containsDotDot(p string) bool {
	for _, c := range splitSlash(p) {
		if c == ".." {
			return true
		}
	}
	return false
}

func splitSlash(p string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	return out
}

// SelectorKind says which list a selector came from.
type SelectorKind string

// Selector kinds of an UnmatchedSelector.
const (
	SelectorPath    SelectorKind = "path"
	SelectorExclude SelectorKind = "exclude"
)

// UnmatchedSelector is a selector that matched no path of a change set.
type UnmatchedSelector struct {
	Kind     SelectorKind `json:"kind"`
	Selector string       `json:"selector"`
}

// parseExcludes turns exclude selectors of a selection into selectors.
func parseExcludes(ex []string) (tree.Selectors, error) {
	sels, err := parsePaths(ex)
	if e, ok := err.(*Error); ok {
		e.Message = strings.Replace(e.Message, "--path", "exclude", 1)
	}
	return sels, err
}

// excludeChanges drops from cs every change excl matches, and every
// directory being deleted or replaced above a change that stays behind.
func excludeChanges(cs []tree.Change, excl tree.Selectors) []tree.Change {
	if len(excl) == 0 {
		return cs
	}
	drop := map[string]bool{}
	for i := range cs {
		if !excl.Match(cs[i].Path) {
			continue
		}
		drop[cs[i].Path] = true
		for p := tree.Parent(cs[i].Path); p != "." && p != ""; p = tree.Parent(p) {
			drop[p] = true
		}
	}
	out := make([]tree.Change, 0, len(cs))
	for i := range cs {
		c := &cs[i]
		if drop[c.Path] && (excl.Match(c.Path) || goesAway(c)) {
			continue
		}
		out = append(out, *c)
	}
	return out
}

// goesAway reports whether a change removes a directory from its place.
func goesAway(c *tree.Change) bool {
	return c.Old != nil && c.Old.Type == tree.Dir && (c.New == nil || c.New.Type != tree.Dir)
}

// unmatched lists the selectors that match no path of the change set all,
// nor a special file of the view.
func unmatched(all []tree.Change, view []tree.Entry, base *tree.Manifest, sels, excl tree.Selectors) []UnmatchedSelector {
	var out []UnmatchedSelector
	check := func(kind SelectorKind, ss tree.Selectors) {
		for _, sel := range ss {
			hit := false
			for i := range all {
				if sel.Match(all[i].Path) {
					hit = true
					break
				}
			}
			for i := 0; !hit && i < len(view); i++ {
				if view[i].Type == tree.Special && sel.Match(view[i].Path) {
					if b := base.Lookup(view[i].Path); b == nil || b.Type != tree.Special {
						hit = true
					}
				}
			}
			if !hit {
				out = append(out, UnmatchedSelector{Kind: kind, Selector: sel.String()})
			}
		}
	}
	check(SelectorPath, sels)
	check(SelectorExclude, excl)
	return out
}

// NoMatchError is the error of a selection whose selectors match nothing:
// like git's pathspec, a selector that matches no path of the change set is
// an error rather than an empty selection.
type NoMatchError struct {
	Tx        string
	Unmatched []UnmatchedSelector
}

func (e *NoMatchError) Error() string {
	var parts []string
	for _, u := range e.Unmatched {
		parts = append(parts, fmt.Sprintf("%s selector %s", u.Kind, quote.Path(u.Selector)))
	}
	return fmt.Sprintf("%s matches no path of the change set of %s", strings.Join(parts, ", "), e.Tx)
}

// CheckMatched refuses a change set with an unmatched selector
// (not-found.path). Its repairs: look at what the change set holds.
func (cs *ChangeSet) CheckMatched(tx string) error {
	if cs.emptied {
		return &Error{Code: CodeNoMatch, Message: fmt.Sprintf("the selection selects no path of the change set of %s: every path its path selectors match is excluded", tx),
			Repairs: []Repair{{Action: "list", Detail: "see the paths of the change set", Command: "wtx diff " + tx + " --name-status"}}}
	}
	if len(cs.Unmatched) == 0 {
		return nil
	}
	ne := &NoMatchError{Tx: tx, Unmatched: cs.Unmatched}
	return &Error{Code: CodeNoMatch, Message: ne.Error(), Err: ne,
		Repairs: []Repair{{Action: "list", Detail: "see the paths of the change set", Command: "wtx diff " + tx + " --name-status"}}}
}
