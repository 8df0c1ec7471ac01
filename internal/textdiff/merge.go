package textdiff

import (
	"sort"
	"strings"
)

// mergeEdit replaces base lines [start, end) (0-based) with lines.
type mergeEdit struct {
	start, end int
	lines      []string
	side       int
}

func sideEdits(base, other []byte, side int) []mergeEdit {
	var out []mergeEdit
	for _, h := range Diff(base, other, 0) {
		e := mergeEdit{side: side}
		if h.OldLines == 0 {
			e.start = h.OldStart
		} else {
			e.start = h.OldStart - 1
		}
		e.end = e.start + h.OldLines
		for _, l := range h.Lines {
			if l.Kind == Insert {
				e.lines = append(e.lines, l.Text)
			}
		}
		out = append(out, e)
	}
	return out
}

// Conflict is a base line range (1-based, inclusive; End < Start for an
// insertion point) that both sides changed differently.
type Conflict struct{ Start, End int }

// Merge3 merges the changes that ours and theirs each made to base. Changes
// to separate parts of base both land; the same change made on both sides
// lands once; different changes to overlapping or adjacent lines are
// conflicts, and then the merge result is nil.
func Merge3(base, ours, theirs []byte) ([]byte, []Conflict) {
	return merge3(base, ours, theirs, nil)
}

// Labels name the three sides in conflict markers.
type Labels struct{ Ours, Base, Theirs string }

// Merge3Marked is Merge3, except that each conflict is written into the
// result between git's markers with the base section, as git writes them
// with merge.conflictStyle=diff3:
//
//	<<<<<<< ours
//	ours' lines
//	||||||| base
//	base lines
//	=======
//	theirs' lines
//	>>>>>>> theirs
//
// so the result is never nil; the conflicts say where the markers stand in
// base. A side whose lines do not end in a newline gets one before the
// marker that follows, so every marker starts a line.
func Merge3Marked(base, ours, theirs []byte, l Labels) ([]byte, []Conflict) {
	return merge3(base, ours, theirs, &l)
}

func merge3(base, ours, theirs []byte, marks *Labels) ([]byte, []Conflict) {
	all := append(sideEdits(base, ours, 0), sideEdits(base, theirs, 1)...)
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].start != all[j].start {
			return all[i].start < all[j].start
		}
		return all[i].end < all[j].end
	})
	bl := Lines(base)
	var out strings.Builder
	var conflicts []Conflict
	cur := 0
	for i := 0; i < len(all); {
		// Gather the group of edits that touch or overlap one another.
		g := []mergeEdit{all[i]}
		end := all[i].end
		j := i + 1
		for ; j < len(all); j++ {
			e := all[j]
			if e.start > end {
				break
			}
			g = append(g, e)
			end = max(end, e.end)
		}
		i = j
		start := g[0].start
		for _, l := range bl[cur:start] {
			out.WriteString(l)
		}
		cur = end
		if chosen, ok := resolve(g, bl); ok {
			for _, l := range chosen {
				out.WriteString(l)
			}
			continue
		}
		conflicts = append(conflicts, Conflict{Start: start + 1, End: end})
		if marks != nil {
			writeMarked(&out, g, bl, start, end, *marks)
		}
	}
	if len(conflicts) > 0 && marks == nil {
		return nil, conflicts
	}
	for _, l := range bl[cur:] {
		out.WriteString(l)
	}
	return []byte(out.String()), conflicts
}

// resolve returns what replaces the base lines a group of touching edits
// covers: the edits of one side (with the base lines between them), or the
// same edit made by both sides. Anything else is a conflict.
func resolve(g []mergeEdit, bl []string) ([]string, bool) {
	sides := map[int][]mergeEdit{}
	for _, e := range g {
		sides[e.side] = append(sides[e.side], e)
	}
	if len(sides) == 1 {
		var out []string
		cur := g[0].start
		for _, e := range g {
			out = append(out, bl[cur:e.start]...)
			out = append(out, e.lines...)
			cur = e.end
		}
		return out, true
	}
	a, b := sides[0], sides[1]
	if len(a) != 1 || len(b) != 1 || a[0].start != b[0].start || a[0].end != b[0].end || strings.Join(a[0].lines, "") != strings.Join(b[0].lines, "") {
		return nil, false
	}
	return a[0].lines, true
}

// writeMarked writes a conflict group between markers: each side's lines
// over base lines [start, end), and those base lines.
func writeMarked(out *strings.Builder, g []mergeEdit, bl []string, start, end int, l Labels) {
	side := func(n int) []string {
		var lines []string
		cur := start
		for _, e := range g {
			if e.side != n {
				continue
			}
			lines = append(lines, bl[cur:e.start]...)
			lines = append(lines, e.lines...)
			cur = e.end
		}
		return append(lines, bl[cur:end]...)
	}
	section := func(marker, label string, lines []string) {
		out.WriteString(marker)
		if label != "" {
			out.WriteString(" " + label)
		}
		out.WriteString("\n")
		for _, ln := range lines {
			out.WriteString(ln)
		}
		if n := len(lines); n > 0 && !strings.HasSuffix(lines[n-1], "\n") {
			out.WriteString("\n")
		}
	}
	section("<<<<<<<", l.Ours, side(0))
	section("|||||||", l.Base, bl[start:end])
	section("=======", "", side(1))
	out.WriteString(">>>>>>>")
	if l.Theirs != "" {
		out.WriteString(" " + l.Theirs)
	}
	out.WriteString("\n")
}
