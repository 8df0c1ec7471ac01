package tree

import (
	"crypto/sha256"
	"fmt"
	"sort"
)

// Action says how a path differs between the base and the view.
type Action uint8

// Actions of a change. The numbers are persisted (ChangesetDigest hashes
// them, and receipts and reviews keep that digest): never renumber one.
const (
	Added    Action = 1 // persisted
	Modified Action = 2 // persisted
	Deleted  Action = 3 // persisted
)

// String returns "added", "modified" or "deleted".
func (a Action) String() string {
	switch a {
	case Added:
		return "added"
	case Modified:
		return "modified"
	case Deleted:
		return "deleted"
	}
	return "unknown"
}

// Change is one path of a change set. Old is the base entry (nil when the
// path was added); New is the view's entry (nil when it was deleted). A type
// change (a file that became a directory, say) is Modified with Old and New of
// different types.
type Change struct {
	Path   string
	Action Action
	Old    *Entry
	New    *Entry
}

// Compare returns the change set between base and view, both sorted by path.
// File entries of view must carry a Digest (copy the base digest for files
// whose stat tuple proves them unchanged). Entries of type Special never
// produce changes of their own: they are reported by the caller.
func Compare(base, view []Entry) []Change {
	var out []Change
	i, j := 0, 0
	for i < len(base) || j < len(view) {
		switch {
		case j >= len(view) || (i < len(base) && base[i].Path < view[j].Path):
			if base[i].Type != Special {
				out = append(out, Change{Path: base[i].Path, Action: Deleted, Old: &base[i]})
			}
			i++
		case i >= len(base) || view[j].Path < base[i].Path:
			if view[j].Type != Special {
				out = append(out, Change{Path: view[j].Path, Action: Added, New: &view[j]})
			}
			j++
		default:
			b, v := &base[i], &view[j]
			switch {
			case b.Type == Special && v.Type == Special:
			case b.Type == Special:
				out = append(out, Change{Path: v.Path, Action: Added, New: v})
			case v.Type == Special:
				out = append(out, Change{Path: b.Path, Action: Deleted, Old: b})
			case !SameContent(b, v):
				out = append(out, Change{Path: b.Path, Action: Modified, Old: b, New: v})
			}
			i++
			j++
		}
	}
	return out
}

// Select returns the changes matched by sels (all of them when sels is
// empty), plus every change that a selected one needs to be applicable on its
// own: the creation of a directory above a selected path.
func Select(changes []Change, sels Selectors) []Change {
	if len(sels) == 0 {
		return changes
	}
	byPath := make(map[string]int, len(changes))
	for i := range changes {
		byPath[changes[i].Path] = i
	}
	keep := make([]bool, len(changes))
	for i := range changes {
		if !sels.Match(changes[i].Path) {
			continue
		}
		keep[i] = true
		for p := Parent(changes[i].Path); p != "."; p = Parent(p) {
			k, ok := byPath[p]
			if !ok {
				continue
			}
			if c := &changes[k]; c.New != nil && c.New.Type == Dir && (c.Old == nil || c.Old.Type != Dir) {
				keep[k] = true
			}
		}
	}
	var out []Change
	for i := range changes {
		if keep[i] {
			out = append(out, changes[i])
		}
	}
	return out
}

// ChangesetDigest is the digest of a change set: every change's path, action
// and both sides' type, permission bits and content. It binds an apply to
// what was reviewed.
func ChangesetDigest(changes []Change) string {
	h := sha256.New()
	var buf []byte
	side := func(e *Entry) {
		if e == nil {
			buf = append(buf, 0)
			return
		}
		buf = appendContent(buf, e)
	}
	for i := range changes {
		c := &changes[i]
		buf = buf[:0]
		buf = appendString(buf, c.Path)
		buf = append(buf, byte(c.Action))
		side(c.Old)
		side(c.New)
		h.Write(buf)
	}
	return fmt.Sprintf("sha256:%x", h.Sum(nil))
}

// Fold walks what the surface holds once changes are applied to base, in
// path order, without building it: emit gets each base entry no change
// touches (with c nil) and the new entry of each change that leaves one
// (with its change). base must be sorted by path, as a manifest's entries
// are; of two changes of one path the later wins.
func Fold(base []Entry, changes []Change, emit func(e *Entry, c *Change)) {
	cs := make([]*Change, len(changes))
	for i := range changes {
		cs[i] = &changes[i]
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].Path < cs[j].Path })
	i, j := 0, 0
	for i < len(base) || j < len(cs) {
		if j+1 < len(cs) && cs[j+1].Path == cs[j].Path {
			j++ // a later change of the same path wins
			continue
		}
		switch {
		case j == len(cs) || (i < len(base) && base[i].Path < cs[j].Path):
			emit(&base[i], nil)
			i++
			continue
		case i < len(base) && base[i].Path == cs[j].Path:
			i++ // replaced or removed by the change
		}
		if cs[j].New != nil {
			emit(cs[j].New, cs[j])
		}
		j++
	}
}

// ResultDigest is the digest (see Digest) of what the surface holds once
// changes are applied to base (see Fold).
func ResultDigest(base []Entry, changes []Change) string {
	d := newEntryDigest()
	Fold(base, changes, func(e *Entry, _ *Change) { d.add(e) })
	return d.sum()
}

// Counts tallies a change set by action.
type Counts struct {
	Added    int `json:"added"`
	Modified int `json:"modified"`
	Deleted  int `json:"deleted"`
}

// Count returns the counts of changes.
func Count(changes []Change) Counts {
	var c Counts
	for i := range changes {
		switch changes[i].Action {
		case Added:
			c.Added++
		case Modified:
			c.Modified++
		case Deleted:
			c.Deleted++
		}
	}
	return c
}

// SortChanges sorts changes by path, bytewise.
func SortChanges(cs []Change) {
	sort.Slice(cs, func(i, j int) bool { return cs[i].Path < cs[j].Path })
}
