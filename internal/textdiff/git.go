package textdiff

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/wtx-dev/wtx/internal/quote"
)

// Git file modes as they appear in a diff.
const (
	ModeFile    uint32 = 0o100644
	ModeExec    uint32 = 0o100755
	ModeSymlink uint32 = 0o120000
	ModeDir     uint32 = 0o040000
)

// FileDiff describes one path of a change set for rendering.
type FileDiff struct {
	// Path is the slash-separated path relative to the workspace root.
	Path string
	// OldMode and NewMode are git modes: 0 when the path is absent on that
	// side, ModeFile, ModeExec, ModeSymlink or ModeDir. A directory is never
	// rendered as content: its side counts as absent.
	OldMode, NewMode uint32
	// Old and New are the file contents, or a symlink's target (without a
	// trailing newline).
	Old, New []byte
	// OldHash and NewHash are optional short content ids for the "index"
	// line; the line is left out when a present side has none.
	OldHash, NewHash string
}

// Options tunes WriteGitOptions.
type Options struct {
	// Context is the number of unchanged lines around each change.
	Context int
	// Binary writes binary content as a "GIT binary patch" (as "git diff
	// --binary" does) that "git apply" can apply, with an "index" line of
	// full git object ids computed from the contents. Without it, binary
	// content is only reported as differing.
	Binary bool
	// NumberHunks writes each hunk's number (from 1, per file) after its
	// "@@ ... @@" header, before the section heading git puts there:
	// "@@ -1,3 +1,4 @@ hunk 1: func main() {". git apply ignores both.
	NumberHunks bool
}

// WriteGit writes fd to w as "git diff" does, with context lines of
// context; see WriteGitOptions.
func WriteGit(w io.Writer, fd FileDiff, context int) error {
	return WriteGitOptions(w, fd, Options{Context: context})
}

// WriteGitOptions writes fd to w in git's unified diff format: the
// "diff --git" line; "new file mode", "deleted file mode" or "old mode" and
// "new mode" lines as applicable; an "index" line when hashes are known;
// "---" and "+++" lines and the hunks, with "\ No newline at end of file"
// where a side lacks a final newline. Binary content is reported as
// "Binary files ... differ" (or, with opt.Binary, written as a git binary
// patch). A pure mode change writes only the mode lines, and a change
// between a file and a symlink is written as a deletion followed by an
// addition, as git does. Nothing is written when nothing differs. Paths
// with control characters, '"', '\\' or non-ASCII bytes are quoted like
// git quotes them.
func WriteGitOptions(w io.Writer, fd FileDiff, opt Options) error {
	om, nm := fd.OldMode, fd.NewMode
	if om == ModeDir {
		om = 0
	}
	if nm == ModeDir {
		nm = 0
	}
	var buf bytes.Buffer
	if om != 0 && nm != 0 && (om == ModeSymlink) != (nm == ModeSymlink) {
		del := fd
		del.NewMode, del.New, del.NewHash = 0, nil, ""
		add := fd
		add.OldMode, add.Old, add.OldHash = 0, nil, ""
		if err := writeSection(&buf, del, om, 0, opt); err != nil {
			return err
		}
		if err := writeSection(&buf, add, 0, nm, opt); err != nil {
			return err
		}
	} else if err := writeSection(&buf, fd, om, nm, opt); err != nil {
		return err
	}
	if buf.Len() == 0 {
		return nil
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("write diff %s: %w", fd.Path, err)
	}
	return nil
}

func writeSection(buf *bytes.Buffer, fd FileDiff, om, nm uint32, opt Options) error {
	if om == 0 && nm == 0 {
		return nil
	}
	old, nw := fd.Old, fd.New
	if om == 0 {
		old = nil
	}
	if nm == 0 {
		nw = nil
	}
	sameContent := om != 0 && nm != 0 && bytes.Equal(old, nw)
	if sameContent && om == nm {
		return nil
	}

	nameA, nameB := quote.Path("a/"+fd.Path), quote.Path("b/"+fd.Path)
	fmt.Fprintf(buf, "diff --git %s %s\n", nameA, nameB)
	switch {
	case om == 0:
		fmt.Fprintf(buf, "new file mode %06o\n", nm)
	case nm == 0:
		fmt.Fprintf(buf, "deleted file mode %06o\n", om)
	case om != nm:
		fmt.Fprintf(buf, "old mode %06o\nnew mode %06o\n", om, nm)
	}
	if sameContent {
		return nil
	}

	binary := om != ModeSymlink && nm != ModeSymlink && (IsBinary(old) || IsBinary(nw))
	modeSuffix := ""
	if om == nm {
		modeSuffix = fmt.Sprintf(" %06o", om)
	}
	if binary && opt.Binary {
		fmt.Fprintf(buf, "index %s..%s%s\n", gitOID(old, om != 0), gitOID(nw, nm != 0), modeSuffix)
		buf.WriteString("GIT binary patch\n")
		if err := writeLiteral(buf, nw); err != nil {
			return fmt.Errorf("write diff %s: %w", fd.Path, err)
		}
		if err := writeLiteral(buf, old); err != nil {
			return fmt.Errorf("write diff %s: %w", fd.Path, err)
		}
		return nil
	}
	if oh, nh, ok := indexHashes(fd.OldHash, fd.NewHash, om != 0, nm != 0); ok {
		fmt.Fprintf(buf, "index %s..%s%s\n", oh, nh, modeSuffix)
	}

	labelA, labelB := "/dev/null", "/dev/null"
	if om != 0 {
		labelA = nameA
	}
	if nm != 0 {
		labelB = nameB
	}
	if binary {
		fmt.Fprintf(buf, "Binary files %s and %s differ\n", labelA, labelB)
		return nil
	}
	if len(old) == 0 && len(nw) == 0 {
		return nil // an empty file created or deleted: the header says it all
	}
	tab := ""
	if strings.ContainsRune(fd.Path, ' ') {
		tab = "\t"
	}
	if om != 0 {
		labelA += tab
	}
	if nm != 0 {
		labelB += tab
	}
	fmt.Fprintf(buf, "--- %s\n+++ %s\n", labelA, labelB)
	var lines [][]byte
	for i, h := range Diff(old, nw, opt.Context) {
		n := 0
		if opt.NumberHunks {
			n = i + 1
		}
		if lines == nil {
			lines = splitLines(old)
		}
		writeHunk(buf, h, n, FuncHeading(lines, h))
	}
	return nil
}

// funcHeadingMax is the most bytes of a line git shows as a hunk's
// heading.
const funcHeadingMax = 80

// FuncHeading is the section heading git writes after a hunk's "@@ ... @@"
// with its default rule (no diff driver): the nearest line of the old text
// above the hunk's first line that starts with an ASCII letter, '_' or '$',
// cut to 80 bytes, trailing white space removed. "" when there is none.
func FuncHeading(old [][]byte, h Hunk) string {
	first := h.OldStart - 1 // 0-based index of the hunk's first old line
	if h.OldLines == 0 {
		first = h.OldStart
	}
	for i := min(first-1, len(old)-1); i >= 0; i-- {
		l := old[i]
		if len(l) == 0 {
			continue
		}
		c := l[0]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '$') {
			continue
		}
		if len(l) > funcHeadingMax {
			l = l[:funcHeadingMax]
		}
		return string(bytes.TrimRight(l, " \t\n\v\f\r"))
	}
	return ""
}

// splitLines splits text into lines, each with its newline.
func splitLines(text []byte) [][]byte {
	var out [][]byte
	for len(text) > 0 {
		i := bytes.IndexByte(text, '\n')
		if i < 0 {
			out = append(out, text)
			break
		}
		out = append(out, text[:i+1])
		text = text[i+1:]
	}
	return out
}

// indexHashes returns the two sides of an "index" line, zeros standing for
// an absent side, or false when a present side has no hash.
func indexHashes(oh, nh string, oldPresent, newPresent bool) (string, string, bool) {
	if oldPresent && oh == "" || newPresent && nh == "" {
		return "", "", false
	}
	if !oldPresent {
		oh = strings.Repeat("0", len(nh))
	}
	if !newPresent {
		nh = strings.Repeat("0", len(oh))
	}
	return oh, nh, true
}

// writeHunk writes h; a number n > 0, else the heading, goes after the
// header.
func writeHunk(buf *bytes.Buffer, h Hunk, n int, heading string) {
	buf.WriteString("@@ -")
	writeRange(buf, h.OldStart, h.OldLines)
	buf.WriteString(" +")
	writeRange(buf, h.NewStart, h.NewLines)
	buf.WriteString(" @@")
	if n > 0 {
		buf.WriteString(" hunk ")
		buf.WriteString(strconv.Itoa(n))
		if heading != "" {
			buf.WriteByte(':')
		}
	}
	if heading != "" {
		buf.WriteByte(' ')
		buf.WriteString(heading)
	}
	buf.WriteString("\n")
	for _, l := range h.Lines {
		buf.WriteByte(l.Kind)
		buf.WriteString(l.Text)
		if !strings.HasSuffix(l.Text, "\n") {
			buf.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

func writeRange(buf *bytes.Buffer, start, n int) {
	buf.WriteString(strconv.Itoa(start))
	if n != 1 {
		buf.WriteByte(',')
		buf.WriteString(strconv.Itoa(n))
	}
}

// gitOID returns the git blob object id of content, or the null id when the
// side is absent.
func gitOID(content []byte, present bool) string {
	if !present {
		return strings.Repeat("0", 2*sha1.Size)
	}
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))
}

// writeLiteral writes one "literal" hunk of a git binary patch: the size,
// the zlib-compressed content in base85 lines of at most 52 bytes each
// (prefixed by their length as 'A'..'Z' for 1..26 and 'a'..'z' for
// 27..52), and an empty line.
func writeLiteral(buf *bytes.Buffer, content []byte) error {
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	if _, err := zw.Write(content); err != nil {
		return fmt.Errorf("compress: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("compress: %w", err)
	}
	fmt.Fprintf(buf, "literal %d\n", len(content))
	data := z.Bytes()
	for len(data) > 0 {
		n := min(len(data), 52)
		if n <= 26 {
			buf.WriteByte(byte('A' + n - 1))
		} else {
			buf.WriteByte(byte('a' + n - 27))
		}
		encode85(buf, data[:n])
		buf.WriteByte('\n')
		data = data[n:]
	}
	buf.WriteByte('\n')
	return nil
}

const alphabet85 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"

// encode85 writes data in git's base85: each group of four bytes (the last
// one zero-padded) as a big-endian number in five digits.
func encode85(buf *bytes.Buffer, data []byte) {
	for len(data) > 0 {
		var v uint32
		for i := 0; i < 4; i++ {
			v <<= 8
			if i < len(data) {
				v |= uint32(data[i])
			}
		}
		var d [5]byte
		for i := 4; i >= 0; i-- {
			d[i] = alphabet85[v%85]
			v /= 85
		}
		buf.Write(d[:])
		data = data[min(4, len(data)):]
	}
}
