package textdiff

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/quote"
)

func TestQuotePath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a/plain.txt", "a/plain.txt"},
		{"a/with space", "a/with space"},
		{"a/caf\xc3\xa9", `"a/caf\303\251"`},
		{`a/q"t`, `"a/q\"t"`},
		{`a/b\s`, `"a/b\\s"`},
		{"a/t\tn\nx", `"a/t\tn\nx"`},
		{"a/\x01\x7f", `"a/\001\177"`},
	}
	for _, tt := range tests {
		if got := quote.Path(tt.in); got != tt.want {
			t.Errorf("quote.Path(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestWriteGit(t *testing.T) {
	tests := []struct {
		name string
		fd   FileDiff
		want string
	}{
		{"unchanged", FileDiff{Path: "p", OldMode: ModeFile, NewMode: ModeFile, Old: []byte("x\n"), New: []byte("x\n")}, ""},
		{"directory only", FileDiff{Path: "d", NewMode: ModeDir}, ""},
		{"edit with hashes",
			FileDiff{Path: "p", OldMode: ModeFile, NewMode: ModeFile, Old: []byte("a\n"), New: []byte("b\n"), OldHash: "1111", NewHash: "2222"},
			"diff --git a/p b/p\nindex 1111..2222 100644\n--- a/p\n+++ b/p\n@@ -1 +1 @@\n-a\n+b\n"},
		{"one hash missing leaves index out",
			FileDiff{Path: "p", OldMode: ModeFile, NewMode: ModeFile, Old: []byte("a\n"), New: []byte("b\n"), OldHash: "1111"},
			"diff --git a/p b/p\n--- a/p\n+++ b/p\n@@ -1 +1 @@\n-a\n+b\n"},
		{"new file with hash",
			FileDiff{Path: "p", NewMode: ModeExec, New: []byte("a\nb"), NewHash: "abcd"},
			"diff --git a/p b/p\nnew file mode 100755\nindex 0000..abcd\n--- /dev/null\n+++ b/p\n@@ -0,0 +1,2 @@\n+a\n+b\n\\ No newline at end of file\n"},
		{"pure mode change",
			FileDiff{Path: "p", OldMode: ModeFile, NewMode: ModeExec, Old: []byte("a\n"), New: []byte("a\n"), OldHash: "1", NewHash: "1"},
			"diff --git a/p b/p\nold mode 100644\nnew mode 100755\n"},
		{"dir replaced by file",
			FileDiff{Path: "p", OldMode: ModeDir, NewMode: ModeFile, New: []byte("a\n")},
			"diff --git a/p b/p\nnew file mode 100644\n--- /dev/null\n+++ b/p\n@@ -0,0 +1 @@\n+a\n"},
		{"binary",
			FileDiff{Path: "p q", OldMode: ModeFile, NewMode: ModeFile, Old: []byte("\x00a"), New: []byte("\x00b")},
			"diff --git a/p q b/p q\nBinary files a/p q and b/p q differ\n"},
		{"binary deleted",
			FileDiff{Path: "p", OldMode: ModeFile, Old: []byte("\x00a")},
			"diff --git a/p b/p\ndeleted file mode 100644\nBinary files a/p and /dev/null differ\n"},
		{"symlink to file",
			FileDiff{Path: "l", OldMode: ModeSymlink, NewMode: ModeFile, Old: []byte("t"), New: []byte("t\n")},
			"diff --git a/l b/l\ndeleted file mode 120000\n--- a/l\n+++ /dev/null\n@@ -1 +0,0 @@\n-t\n\\ No newline at end of file\n" +
				"diff --git a/l b/l\nnew file mode 100644\n--- /dev/null\n+++ b/l\n@@ -0,0 +1 @@\n+t\n"},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		if err := WriteGit(&buf, tt.fd, 3); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if buf.String() != tt.want {
			t.Errorf("%s:\ngot:\n%s\nwant:\n%s", tt.name, buf.String(), tt.want)
		}
	}
}

func TestWriteGitBinaryPatch(t *testing.T) {
	fd := FileDiff{Path: "b", OldMode: ModeFile, NewMode: ModeFile, Old: []byte("\x00old"), New: []byte("\x00new")}
	var buf bytes.Buffer
	if err := WriteGitOptions(&buf, fd, Options{Binary: true}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	// git's ids of the two blobs ("git hash-object").
	for _, want := range []string{
		"index " + gitOID(fd.Old, true) + ".." + gitOID(fd.New, true) + " 100644\n",
		"GIT binary patch\nliteral 4\n",
		"\n\nliteral 4\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("binary patch lacks %q:\n%s", want, out)
		}
	}
	if got, want := gitOID(nil, true), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"; got != want {
		t.Errorf("empty blob id %s, want %s", got, want)
	}
}

func TestEncode85(t *testing.T) {
	tests := []struct {
		in   []byte
		want string
	}{
		{[]byte{0, 0, 0, 0}, "00000"},
		{[]byte{0xff, 0xff, 0xff, 0xff}, "|NsC0"},
		{[]byte{0, 0, 0, 1}, "00001"},
		{[]byte{1}, "0RR91"}, // padded to 01 00 00 00
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		encode85(&buf, tt.in)
		if buf.String() != tt.want {
			t.Errorf("encode85(%x) = %s, want %s", tt.in, buf.String(), tt.want)
		}
	}
}

type failWriter struct{}

var errFail = errors.New("disk full")

func (failWriter) Write([]byte) (int, error) { return 0, errFail }

func TestWriteErrors(t *testing.T) {
	fd := FileDiff{Path: "p", NewMode: ModeFile, New: []byte("a\n")}
	if err := WriteGit(failWriter{}, fd, 3); !errors.Is(err, errFail) {
		t.Errorf("WriteGit error %v, want %v", err, errFail)
	}
	if err := WriteStat(failWriter{}, []FileDiff{fd}, 80); !errors.Is(err, errFail) {
		t.Errorf("WriteStat error %v, want %v", err, errFail)
	}
	cw := NewColorWriter(failWriter{}, true)
	if _, err := cw.Write([]byte("diff --git a/p b/p\n")); !errors.Is(err, errFail) {
		t.Errorf("ColorWriter error %v, want %v", err, errFail)
	}
}

func TestCounts(t *testing.T) {
	tests := []struct {
		name     string
		fd       FileDiff
		ins, del int
	}{
		{"edit", FileDiff{OldMode: ModeFile, NewMode: ModeFile, Old: []byte("a\nb\nc\n"), New: []byte("a\nB\nc\nd\n")}, 2, 1},
		{"new", FileDiff{NewMode: ModeFile, New: []byte("a\nb")}, 2, 0},
		{"deleted", FileDiff{OldMode: ModeExec, Old: []byte("a\n")}, 0, 1},
		{"mode only", FileDiff{OldMode: ModeFile, NewMode: ModeExec, Old: []byte("a\n"), New: []byte("a\n")}, 0, 0},
		{"binary", FileDiff{OldMode: ModeFile, NewMode: ModeFile, Old: []byte("a\x00"), New: []byte("b\n")}, 0, 0},
		{"type change", FileDiff{OldMode: ModeFile, NewMode: ModeSymlink, Old: []byte("a\nb\n"), New: []byte("t")}, 1, 2},
		{"directory", FileDiff{OldMode: ModeDir, NewMode: ModeDir}, 0, 0},
	}
	for _, tt := range tests {
		ins, del := Counts(tt.fd)
		if ins != tt.ins || del != tt.del {
			t.Errorf("%s: Counts = %d, %d, want %d, %d", tt.name, ins, del, tt.ins, tt.del)
		}
	}
}

func TestWriteStat(t *testing.T) {
	many := strings.Repeat("x\n", 200)
	tests := []struct {
		name  string
		fds   []FileDiff
		width int
		want  string
	}{
		{"none", nil, 80, " 0 files changed\n"},
		{"mixed", []FileDiff{
			{Path: "a.txt", OldMode: ModeFile, NewMode: ModeFile, Old: []byte("1\n2\n"), New: []byte("1\n3\n4\n")},
			{Path: "bin", OldMode: ModeFile, NewMode: ModeFile, Old: []byte("\x00ab"), New: []byte("\x00abcd")},
			{Path: "gone", OldMode: ModeFile, Old: []byte("x\n")},
			{Path: "same", OldMode: ModeFile, NewMode: ModeFile, Old: []byte("x\n"), New: []byte("x\n")},
		}, 80,
			" a.txt |   3 ++-\n bin   | Bin 3 -> 5 bytes\n gone  |   1 -\n 3 files changed, 2 insertions(+), 2 deletions(-)\n"},
		{"mode only", []FileDiff{{Path: "m", OldMode: ModeFile, NewMode: ModeExec}}, 80,
			" m | 0\n 1 file changed, 0 insertions(+), 0 deletions(-)\n"},
		{"only insertions", []FileDiff{{Path: "n", NewMode: ModeFile, New: []byte("x\n")}}, 80,
			" n | 1 +\n 1 file changed, 1 insertion(+)\n"},
		{"scaled", []FileDiff{{Path: "big", NewMode: ModeFile, New: []byte(many)}}, 40,
			" big | 200 " + strings.Repeat("+", 29) + "\n 1 file changed, 200 insertions(+)\n"},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		if err := WriteStat(&buf, tt.fds, tt.width); err != nil {
			t.Fatal(err)
		}
		if buf.String() != tt.want {
			t.Errorf("%s:\ngot:\n%s\nwant:\n%s", tt.name, buf.String(), tt.want)
		}
		for _, l := range strings.Split(buf.String(), "\n") {
			if len(l) > max(tt.width, 40) {
				t.Errorf("%s: line wider than %d: %q", tt.name, tt.width, l)
			}
		}
	}
}

func TestWriteStatLongName(t *testing.T) {
	fd := FileDiff{Path: strings.Repeat("d/", 60) + "file", NewMode: ModeFile, New: []byte(strings.Repeat("x\n", 100))}
	var buf bytes.Buffer
	if err := WriteStat(&buf, []FileDiff{fd}, 60); err != nil {
		t.Fatal(err)
	}
	first := strings.SplitN(buf.String(), "\n", 2)[0]
	if len(first) != 60 || !strings.HasPrefix(first, " ...") || !strings.Contains(first, "/file | 100 +") {
		t.Errorf("long name line %q (len %d)", first, len(first))
	}
}

func TestScaleGraph(t *testing.T) {
	tests := []struct{ ins, del, maxChange, width, wantIns, wantDel int }{
		{3, 2, 5, 10, 3, 2},
		{100, 0, 100, 10, 10, 0},
		{1, 99, 100, 10, 1, 9},
		{99, 1, 100, 10, 9, 1},
		{1, 1, 1000, 10, 1, 1},
		{0, 1, 1000, 10, 0, 1},
	}
	for _, tt := range tests {
		i, d := scaleGraph(tt.ins, tt.del, tt.maxChange, tt.width)
		if i != tt.wantIns || d != tt.wantDel {
			t.Errorf("scaleGraph(%d, %d, %d, %d) = %d, %d, want %d, %d",
				tt.ins, tt.del, tt.maxChange, tt.width, i, d, tt.wantIns, tt.wantDel)
		}
	}
}

func TestColorWriter(t *testing.T) {
	in := "diff --git a/p b/p\n--- a/p\n+++ b/p\n@@ -1,3 +1,2 @@\n ctx\n--- a/p\n-x\n+y\n\\ No newline at end of file\n" +
		"diff --git a/q b/q\n"
	const (
		b = "\x1b[1m"
		c = "\x1b[36m"
		r = "\x1b[31m"
		g = "\x1b[32m"
		z = "\x1b[m"
	)
	want := b + "diff --git a/p b/p" + z + "\n" + b + "--- a/p" + z + "\n" + b + "+++ b/p" + z + "\n" +
		c + "@@ -1,3 +1,2 @@" + z + "\n ctx\n" + r + "--- a/p" + z + "\n" + r + "-x" + z + "\n" + g + "+y" + z + "\n" +
		"\\ No newline at end of file\n" + b + "diff --git a/q b/q" + z + "\n"

	// Feed it in awkward pieces: colouring must not depend on write sizes.
	for _, step := range []int{1, 3, 7, len(in)} {
		var out bytes.Buffer
		cw := NewColorWriter(&out, true)
		for i := 0; i < len(in); i += step {
			if _, err := cw.Write([]byte(in[i:min(i+step, len(in))])); err != nil {
				t.Fatal(err)
			}
		}
		if err := cw.Flush(); err != nil {
			t.Fatal(err)
		}
		if out.String() != want {
			t.Errorf("step %d:\ngot  %q\nwant %q", step, out.String(), want)
		}
	}

	var plain bytes.Buffer
	cw := NewColorWriter(&plain, false)
	cw.Write([]byte(in))
	if err := cw.Flush(); err != nil || plain.String() != in {
		t.Errorf("disabled writer changed the text: %q, %v", plain.String(), err)
	}

	var partial bytes.Buffer
	cw = NewColorWriter(&partial, true)
	cw.Write([]byte("diff"))
	if partial.Len() != 0 {
		t.Errorf("partial line written early: %q", partial.String())
	}
	if err := cw.Flush(); err != nil || partial.String() != b+"diff"+z {
		t.Errorf("Flush wrote %q, %v", partial.String(), err)
	}
}
