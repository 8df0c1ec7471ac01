package textdiff

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
)

// ANSI colours, as git uses them by default.
const (
	colorMeta  = "\x1b[1m"
	colorFrag  = "\x1b[36m"
	colorOld   = "\x1b[31m"
	colorNew   = "\x1b[32m"
	colorReset = "\x1b[m"
)

// ColorWriter colours the output of WriteGit line by line the way git does:
// header lines bold, "@@" lines cyan, removed lines red and added lines
// green. It tracks each hunk's line counts, so a removed line that reads
// "--- x" is still coloured as content. Call Flush after the last write.
type ColorWriter struct {
	w       io.Writer
	enabled bool
	partial []byte
	old     int // old lines still expected in the current hunk
	new     int // new lines still expected in the current hunk
	err     error
}

// NewColorWriter returns a ColorWriter writing to w. When enabled is false
// it passes everything through unchanged.
func NewColorWriter(w io.Writer, enabled bool) *ColorWriter {
	return &ColorWriter{w: w, enabled: enabled}
}

// Write colours the complete lines of p and holds back a trailing partial
// line until it is completed or Flush is called.
func (c *ColorWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if !c.enabled {
		n, err := c.w.Write(p)
		if err != nil {
			c.err = fmt.Errorf("write colored diff: %w", err)
			return n, c.err
		}
		return n, nil
	}
	var out bytes.Buffer
	data := append(c.partial, p...)
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		c.colorLine(&out, data[:i])
		data = data[i+1:]
	}
	c.partial = append(c.partial[:0:0], data...)
	if _, err := c.w.Write(out.Bytes()); err != nil {
		c.err = fmt.Errorf("write colored diff: %w", err)
		return 0, c.err
	}
	return len(p), nil
}

// Flush writes a held-back partial line, if any.
func (c *ColorWriter) Flush() error {
	if c.err != nil || len(c.partial) == 0 {
		return c.err
	}
	var out bytes.Buffer
	c.colorLine(&out, c.partial)
	b := bytes.TrimSuffix(out.Bytes(), []byte("\n"))
	c.partial = nil
	if _, err := c.w.Write(b); err != nil {
		c.err = fmt.Errorf("write colored diff: %w", err)
	}
	return c.err
}

func (c *ColorWriter) colorLine(out *bytes.Buffer, line []byte) {
	paint := func(color string) {
		out.WriteString(color)
		out.Write(line)
		out.WriteString(colorReset)
		out.WriteByte('\n')
	}
	if c.old > 0 || c.new > 0 {
		kind := byte(0)
		if len(line) > 0 {
			kind = line[0]
		}
		switch kind {
		case Delete:
			c.old--
			paint(colorOld)
			return
		case Insert:
			c.new--
			paint(colorNew)
			return
		case Context:
			c.old--
			c.new--
			out.Write(line)
			out.WriteByte('\n')
			return
		case '\\':
			out.Write(line)
			out.WriteByte('\n')
			return
		}
		c.old, c.new = 0, 0 // not hunk content after all
	}
	if len(line) > 0 && line[0] == '\\' {
		out.Write(line)
		out.WriteByte('\n')
		return
	}
	if bytes.HasPrefix(line, []byte("@@ ")) {
		c.old, c.new = hunkCounts(line)
		// As git: the range in the fragment colour, the heading after it
		// plain.
		if end := bytes.Index(line[3:], []byte(" @@")); end >= 0 && 3+end+3 < len(line) {
			out.WriteString(colorFrag)
			out.Write(line[:3+end+3])
			out.WriteString(colorReset)
			out.Write(line[3+end+3:])
			out.WriteByte('\n')
			return
		}
		paint(colorFrag)
		return
	}
	paint(colorMeta)
}

// hunkCounts parses the line counts of a "@@ -a,b +c,d @@" header.
func hunkCounts(line []byte) (old, new int) {
	f := bytes.Fields(line)
	if len(f) < 3 {
		return 0, 0
	}
	return rangeCount(f[1]), rangeCount(f[2])
}

func rangeCount(r []byte) int {
	if len(r) < 2 {
		return 0
	}
	r = r[1:]
	if i := bytes.IndexByte(r, ','); i >= 0 {
		n, err := strconv.Atoi(string(r[i+1:]))
		if err != nil {
			return 0
		}
		return n
	}
	return 1
}
