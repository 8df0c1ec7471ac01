package textdiff

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/wtx-dev/wtx/internal/quote"
)

// normalized returns fd's modes with directories counted as absent, and
// whether anything about the path differs.
func normalized(fd FileDiff) (om, nm uint32, differs bool) {
	om, nm = fd.OldMode, fd.NewMode
	if om == ModeDir {
		om = 0
	}
	if nm == ModeDir {
		nm = 0
	}
	switch {
	case om == 0 && nm == 0:
		return om, nm, false
	case om == 0 || nm == 0 || om != nm:
		return om, nm, true
	}
	return om, nm, !bytes.Equal(fd.Old, fd.New)
}

// isBinaryDiff reports whether fd's content change is shown as binary.
func isBinaryDiff(fd FileDiff, om, nm uint32) bool {
	if om == ModeSymlink || nm == ModeSymlink {
		return false
	}
	return om != 0 && IsBinary(fd.Old) || nm != 0 && IsBinary(fd.New)
}

// Counts returns the number of inserted and deleted lines WriteGit shows
// for fd; both are 0 for binary content. A change between a file and a
// symlink counts all old lines as deleted and all new ones as inserted.
func Counts(fd FileDiff) (ins, del int) {
	om, nm, differs := normalized(fd)
	if !differs || isBinaryDiff(fd, om, nm) {
		return 0, 0
	}
	var old, nw []byte
	if om != 0 {
		old = fd.Old
	}
	if nm != 0 {
		nw = fd.New
	}
	if om != 0 && nm != 0 && (om == ModeSymlink) != (nm == ModeSymlink) {
		return len(Lines(nw)), len(Lines(old))
	}
	for _, h := range Diff(old, nw, 0) {
		for _, l := range h.Lines {
			switch l.Kind {
			case Insert:
				ins++
			case Delete:
				del++
			}
		}
	}
	return ins, del
}

// WriteStat writes a summary of fds to w like "git diff --stat": one
// " path | N ++--" line per path that differs, fitted to width columns
// (binary content as "Bin A -> B bytes"), then a line such as
// " 2 files changed, 3 insertions(+), 1 deletion(-)".
func WriteStat(w io.Writer, fds []FileDiff, width int) error {
	rows := make([]StatRow, 0, len(fds))
	for _, fd := range fds {
		if r, ok := StatOf(fd); ok {
			rows = append(rows, r)
		}
	}
	return WriteStatRows(w, rows, width)
}

// StatRow is one path's line of a stat: what WriteStat needs of a
// FileDiff, without its contents.
type StatRow struct {
	name     string // quoted
	ins, del int
	binary   bool
	old, new int // sizes of binary content
}

// StatOf returns fd's row of a stat, and false when nothing about the path
// differs (it gets no row).
func StatOf(fd FileDiff) (StatRow, bool) {
	om, nm, differs := normalized(fd)
	if !differs {
		return StatRow{}, false
	}
	r := StatRow{name: quote.Path(fd.Path)}
	if isBinaryDiff(fd, om, nm) {
		r.binary = true
		if om != 0 {
			r.old = len(fd.Old)
		}
		if nm != 0 {
			r.new = len(fd.New)
		}
		return r, true
	}
	r.ins, r.del = Counts(fd)
	return r, true
}

// WriteStatRows is WriteStat of rows made by StatOf, in order.
func WriteStatRows(w io.Writer, rows []StatRow, width int) error {
	return WriteStatRowsColor(w, rows, width, false)
}

// WriteStatRowsColor is WriteStatRows with git's colours when color is
// set: the '+' marks green, the '-' marks red.
func WriteStatRowsColor(w io.Writer, rows []StatRow, width int, color bool) error {
	maxName, maxChange, numW := 0, 0, 1
	totalIns, totalDel := 0, 0
	for _, r := range rows {
		if r.binary {
			numW = max(numW, len("Bin"))
		} else {
			maxChange = max(maxChange, r.ins+r.del)
			numW = max(numW, len(strconv.Itoa(r.ins+r.del)))
		}
		totalIns += r.ins
		totalDel += r.del
		maxName = max(maxName, len(r.name))
	}

	// " " name " | " count " " graph
	overhead := numW + 5
	width = max(width, overhead+16)
	nameW, graphW := maxName, maxChange
	if nameW+overhead+graphW > width {
		if limit := max(6, width*3/8-overhead); graphW > limit {
			graphW = limit
		}
		if nameW > width-overhead-graphW {
			nameW = width - overhead - graphW
		} else {
			graphW = width - overhead - nameW
		}
	}

	var buf bytes.Buffer
	for _, r := range rows {
		name := r.name
		if len(name) > nameW {
			name = "..." + name[len(name)-(nameW-3):]
		}
		fmt.Fprintf(&buf, " %-*s | ", nameW, name)
		if r.binary {
			fmt.Fprintf(&buf, "%*s %d -> %d bytes\n", numW, "Bin", r.old, r.new)
			continue
		}
		fmt.Fprintf(&buf, "%*d", numW, r.ins+r.del)
		plus, minus := scaleGraph(r.ins, r.del, maxChange, graphW)
		if plus+minus > 0 {
			buf.WriteByte(' ')
			if color && plus > 0 {
				buf.WriteString(colorNew + strings.Repeat("+", plus) + colorReset)
			} else {
				buf.WriteString(strings.Repeat("+", plus))
			}
			if color && minus > 0 {
				buf.WriteString(colorOld + strings.Repeat("-", minus) + colorReset)
			} else {
				buf.WriteString(strings.Repeat("-", minus))
			}
		}
		buf.WriteByte('\n')
	}
	buf.WriteString(summary(len(rows), totalIns, totalDel))
	buf.WriteByte('\n')
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("write stat: %w", err)
	}
	return nil
}

// scaleGraph fits ins '+' and del '-' marks into width columns, where
// maxChange is the largest ins+del of all rows. A nonzero count keeps at
// least one mark.
func scaleGraph(ins, del, maxChange, width int) (int, int) {
	if maxChange <= width {
		return ins, del
	}
	scale := func(n int) int {
		if n == 0 {
			return 0
		}
		return max(1, (n*width+maxChange/2)/maxChange)
	}
	total := scale(ins + del)
	if ins > 0 && del > 0 && total < 2 {
		total = 2
	}
	if ins < del {
		p := min(scale(ins), total-1)
		if ins == 0 {
			p = 0
		}
		return p, total - p
	}
	m := min(scale(del), total-1)
	if del == 0 {
		m = 0
	}
	return total - m, m
}

func summary(files, ins, del int) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, " %d %s changed", files, plural(files, "file", "files"))
	if files == 0 {
		return sb.String()
	}
	if ins > 0 || del == 0 {
		fmt.Fprintf(&sb, ", %d %s(+)", ins, plural(ins, "insertion", "insertions"))
	}
	if del > 0 || ins == 0 {
		fmt.Fprintf(&sb, ", %d %s(-)", del, plural(del, "deletion", "deletions"))
	}
	return sb.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
