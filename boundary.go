package wtx

import (
	"fmt"
	"strings"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/jsonname"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/stage"
	"github.com/wtx-dev/wtx/internal/tree"
)

// A name enters a stage by a per-file operation (read, write, edit, rm), a
// batch item or an MCP tool, which all come through here, or by a command
// run in the view, whose writes the change set reports. Two kinds of name
// never enter:
//
//   - a path the stage's exclude selectors cover: it lies outside the
//     stage's surface, like a path outside the workspace (C-001), so it is
//     refused as refusal.boundary before anything is read or written (I-008);
//   - a name with a component starting with .wtx-tmp-, which apply and
//     recovery keep for their temporary files: refused as
//     usage.reserved-name.

// reservedPath reports whether a component of rel starts with the prefix
// of wtx's temporary files, which recovery would take for its own.
func reservedPath(rel string) bool {
	for _, c := range strings.Split(rel, "/") {
		if strings.HasPrefix(c, tempPrefix) {
			return true
		}
	}
	return false
}

// reservedError refuses a name wtx keeps for its temporary files.
func reservedError(p string) *Error {
	return &Error{Code: CodeReserved,
		Message:   fmt.Sprintf("%s: names starting with %s are reserved for wtx's temporary files and never enter a stage", quote.Path(p), tempPrefix),
		Conflicts: []Conflict{{Path: p, Kind: "reserved"}}}
}

// checkReserved refuses p when it holds a reserved name.
func checkReserved(p string) error {
	if reservedPath(p) && !failpoint.Disabled("reserved") {
		return reservedError(p)
	}
	return nil
}

// checkExcluded refuses p when the stage's exclude selectors cover it.
func checkExcluded(exclude tree.Selectors, p, tx string) error {
	if !exclude.Match(p) || failpoint.Disabled("exclude") {
		return nil
	}
	where := "the stage"
	if tx != "" {
		where = "stage " + tx
	}
	return &Error{Code: CodeBoundary,
		Message:   fmt.Sprintf("%s is excluded from %s: it is outside the stage's surface and is never read, written or applied through it", quote.Path(p), where),
		Conflicts: []Conflict{{Path: p, Kind: "excluded"}}}
}

// checkOpPath checks the path of a per-file operation on s: inside the
// workspace (C-001), not a reserved name, not excluded (I-008).
func (s *Stage) checkOpPath(p string) error {
	if err := validOpPath(p); err != nil {
		return err
	}
	if err := checkReserved(p); err != nil {
		return err
	}
	return checkExcluded(s.exclude, p, s.ID())
}

// checkBatch refuses, before any stage exists, a batch with an item whose
// path leaves the workspace, holds a reserved name or is excluded by the
// batch's own selectors: a batch is all or nothing, so one bad name stops
// every item.
func checkBatch(items []BatchItem, begin BeginOptions) error {
	exclude, err := tree.ParseSelectors(begin.Exclude)
	if err != nil {
		return &Error{Code: CodeUsage, Message: "exclude selector: " + err.Error()}
	}
	for i, it := range items {
		err := validOpPath(it.Path)
		if err == nil {
			err = checkReserved(it.Path)
		}
		if err == nil {
			err = checkExcluded(exclude, it.Path, "")
		}
		if err != nil {
			e := *AsError(err)
			e.Message = fmt.Sprintf("batch item %d (%s %s): %s; nothing was applied", i+1, it.Command, quote.Path(it.Path), e.Message)
			return &e
		}
	}
	return nil
}

// reservedApplyError refuses an apply whose selection holds names a command
// wrote under wtx's reserved prefix: the change set shows them, but no
// apply ever writes them (recovery would take them for its own temporary
// files).
func reservedApplyError(tx string, cs *ChangeSet) *Error {
	e := &Error{Code: CodeReserved}
	for i := range cs.changes {
		if p := cs.changes[i].Path; reservedPath(p) {
			e.Conflicts = append(e.Conflicts, Conflict{Path: p, Kind: "reserved"})
		}
	}
	if len(e.Conflicts) > 0 {
		e.Repairs = []Repair{{Action: "remove", Detail: "remove the reserved names in the stage", Command: fmt.Sprintf("wtx run --tx %s -- rm -rf -- %s", tx, shellQuote(e.Conflicts[0].Path))}}
	}
	e.Message = fmt.Sprintf("stage %s holds %d path(s) whose names start with %s, which is reserved for wtx's temporary files: no apply writes them; remove them in the stage, or apply the other paths only",
		tx, len(e.Conflicts), tempPrefix)
	return e
}

// LeftOut is a path a command wrote under one of the stage's exclude
// selectors: it is never part of the change set and never applied, and the
// run summary and receipt say so. A directory stands for everything in it.
type LeftOut struct {
	Path string `json:"path" jsonname:"b64"`
	Type string `json:"type"` // "dir", or "file" for anything else
}

// MarshalJSON writes the path byte-safely: "path" and, for a name that is
// not valid UTF-8, "path_b64".
func (l LeftOut) MarshalJSON() ([]byte, error) { return jsonname.Marshal(l) }

// leftOutOf returns what the view's last scan left out by exclusion.
func leftOutOf(v stage.View) []LeftOut {
	lr, ok := v.(stage.LeftOutReporter)
	if !ok || failpoint.Disabled("left-out-notice") {
		return []LeftOut{}
	}
	paths := lr.LeftOut()
	out := make([]LeftOut, 0, len(paths))
	for _, p := range paths {
		t := "file"
		if p.Dir {
			t = "dir"
		}
		out = append(out, LeftOut{Path: p.Path, Type: t})
	}
	return out
}
