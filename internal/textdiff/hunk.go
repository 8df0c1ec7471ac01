package textdiff

import (
	"bytes"
	"errors"
	"fmt"
)

// ErrMismatch reports that a hunk's old lines are not found in the text it
// is applied to.
var ErrMismatch = errors.New("hunk does not match")

// Line kinds, the prefix byte of a line in a unified diff.
const (
	Context byte = ' '
	Delete  byte = '-'
	Insert  byte = '+'
)

// Line is one line of a hunk.
type Line struct {
	Kind byte   // Context, Delete or Insert
	Text string // the line, with its trailing "\n" if it had one
}

// Hunk is one hunk of a unified diff, "@@ -OldStart,OldLines
// +NewStart,NewLines @@". Starts are 1-based line numbers; when a side has
// no lines its start is the number of the line before the hunk (0 at the
// top of the text), as git prints it.
type Hunk struct {
	OldStart, OldLines int
	NewStart, NewLines int
	Lines              []Line
}

// Diff returns the hunks that turn a into b, each with up to context
// unchanged lines around its changes (git's default is 3). Hunks whose
// context would touch or overlap are merged. Equal texts give no hunks.
//
// The diff is a shortest line edit script (Myers) unless the texts differ
// in very many places, where the search settles for a short one to bound
// its cost. Either way, applying all hunks to a gives b exactly.
func Diff(a, b []byte, context int) []Hunk {
	if bytes.Equal(a, b) {
		return nil
	}
	if context < 0 {
		context = 0
	}
	al, bl := Lines(a), Lines(b)
	ca, cb := changes(al, bl)
	return hunks(al, bl, ca, cb, context)
}

// edit is one run of changed lines: a[a0:a1] replaced by b[b0:b1].
type edit struct{ a0, a1, b0, b1 int }

func edits(ca, cb []bool) []edit {
	var out []edit
	i, j := 0, 0
	for i < len(ca) || j < len(cb) {
		if i < len(ca) && j < len(cb) && !ca[i] && !cb[j] {
			i++
			j++
			continue
		}
		e := edit{a0: i, b0: j}
		for i < len(ca) && ca[i] {
			i++
		}
		for j < len(cb) && cb[j] {
			j++
		}
		e.a1, e.b1 = i, j
		out = append(out, e)
	}
	return out
}

func hunks(al, bl []string, ca, cb []bool, context int) []Hunk {
	es := edits(ca, cb)
	var out []Hunk
	for start := 0; start < len(es); {
		end := start
		for end+1 < len(es) && es[end+1].a0-es[end].a1 <= 2*context {
			end++
		}
		first, last := es[start], es[end]
		a0 := max(0, first.a0-context)
		b0 := first.b0 - (first.a0 - a0)
		a1 := min(len(al), last.a1+context)
		b1 := last.b1 + (a1 - last.a1)

		h := Hunk{OldLines: a1 - a0, NewLines: b1 - b0}
		h.OldStart, h.NewStart = a0, b0
		if h.OldLines > 0 {
			h.OldStart++
		}
		if h.NewLines > 0 {
			h.NewStart++
		}
		pos := a0
		for _, e := range es[start : end+1] {
			for _, s := range al[pos:e.a0] {
				h.Lines = append(h.Lines, Line{Context, s})
			}
			for _, s := range al[e.a0:e.a1] {
				h.Lines = append(h.Lines, Line{Delete, s})
			}
			for _, s := range bl[e.b0:e.b1] {
				h.Lines = append(h.Lines, Line{Insert, s})
			}
			pos = e.a1
		}
		for _, s := range al[pos:a1] {
			h.Lines = append(h.Lines, Line{Context, s})
		}
		out = append(out, h)
		start = end + 1
	}
	return out
}

// Apply applies to a the hunks whose 0-based indices are in sel, or all
// hunks when sel is nil, and returns the result. The lines of hunks left
// out stay as they are in a. Hunks must be in order and each must match a
// at its OldStart exactly; otherwise Apply returns an error wrapping
// ErrMismatch.
func Apply(a []byte, hunks []Hunk, sel []int) ([]byte, error) {
	chosen := make([]bool, len(hunks))
	if sel == nil {
		for i := range chosen {
			chosen[i] = true
		}
	}
	for _, i := range sel {
		if i < 0 || i >= len(hunks) {
			return nil, fmt.Errorf("apply hunk %d: no such hunk (have %d)", i, len(hunks))
		}
		chosen[i] = true
	}

	lines := Lines(a)
	out := make([]byte, 0, len(a))
	pos := 0
	for i, h := range hunks {
		if !chosen[i] {
			continue
		}
		start := h.OldStart
		if h.OldLines > 0 {
			start--
		}
		if start < pos || start+h.OldLines > len(lines) {
			return nil, fmt.Errorf("apply hunk %d: old lines %d-%d out of range or order: %w",
				i, start+1, start+h.OldLines, ErrMismatch)
		}
		for _, s := range lines[pos:start] {
			out = append(out, s...)
		}
		old, added := 0, 0
		for _, l := range h.Lines {
			switch l.Kind {
			case Context, Delete:
				if old >= h.OldLines || lines[start+old] != l.Text {
					return nil, fmt.Errorf("apply hunk %d: line %d: %w", i, start+old+1, ErrMismatch)
				}
				old++
				if l.Kind == Context {
					out = append(out, l.Text...)
					added++
				}
			case Insert:
				out = append(out, l.Text...)
				added++
			default:
				return nil, fmt.Errorf("apply hunk %d: bad line kind %q", i, l.Kind)
			}
		}
		if old != h.OldLines || added != h.NewLines {
			return nil, fmt.Errorf("apply hunk %d: header says -%d +%d, lines say -%d +%d: %w",
				i, h.OldLines, h.NewLines, old, added, ErrMismatch)
		}
		pos = start + old
	}
	for _, s := range lines[pos:] {
		out = append(out, s...)
	}
	return out, nil
}
