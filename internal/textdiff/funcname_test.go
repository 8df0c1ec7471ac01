package textdiff

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGitAgreesOnFuncHeadings: the heading after each hunk's "@@ ... @@"
// is the one git's default rule gives (git diff --no-index, no diff
// driver), for hunks where git and wtx chose the same range.
func TestGitAgreesOnFuncHeadings(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not on PATH")
	}
	long := "func " + strings.Repeat("x", 74) + "  yz(long) {"
	edge := "type T" + strings.Repeat(" ", 74) + "tail"
	vocab := []string{
		"func alpha() {", "\tx := 1", "  indented()", "_under_score:", "$dollar", "1 digit first",
		"# comment", "", "}", "package p", "Class Foo", "\tif y {", "\t}", long, edge, "label:\t ",
		"\xffnot ascii", "émigré", "(paren", "z",
	}
	r := rand.New(rand.NewPCG(5, 9))
	dir := t.TempDir()
	env := append(os.Environ(), "HOME="+dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	matched := 0
	for round := 0; round < 40; round++ {
		var a []string
		for i := 0; i < 30+r.IntN(60); i++ {
			a = append(a, vocab[r.IntN(len(vocab))])
		}
		b := append([]string(nil), a...)
		for e := 0; e < 1+r.IntN(4); e++ {
			i := r.IntN(len(b))
			switch r.IntN(3) {
			case 0:
				b[i] = "changed " + b[i]
			case 1:
				b = append(b[:i], b[i+1:]...)
			default:
				b = append(b[:i], append([]string{"\tinserted()"}, b[i:]...)...)
			}
		}
		old, nw := []byte(strings.Join(a, "\n")+"\n"), []byte(strings.Join(b, "\n")+"\n")
		pa, pb := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		if err := os.WriteFile(pa, old, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(pb, nw, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("git", "diff", "--no-index", "--no-color", "--no-ext-diff", "-U3", "a", "b")
		cmd.Dir, cmd.Env = dir, env
		out, _ := cmd.Output() // exit 1: the files differ
		var got bytes.Buffer
		if err := WriteGit(&got, FileDiff{Path: "a", OldMode: ModeFile, NewMode: ModeFile, Old: old, New: nw}, 3); err != nil {
			t.Fatal(err)
		}
		ours := headings(got.String())
		for rng, want := range headings(string(out)) {
			have, ok := ours[rng]
			if !ok {
				continue // git aligned this hunk differently
			}
			matched++
			if have != want {
				t.Errorf("round %d, hunk %s: heading %q, git's %q", round, rng, have, want)
			}
		}
	}
	if matched < 40 {
		t.Fatalf("only %d hunks had the same range as git's: the comparison says little", matched)
	}
}

// headings maps each hunk's "@@ -a,b +c,d @@" to the text after it.
func headings(diff string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(diff, "\n") {
		if !strings.HasPrefix(l, "@@ ") {
			continue
		}
		end := strings.Index(l[3:], " @@")
		if end < 0 {
			continue
		}
		rng := l[:3+end+3]
		m[rng] = strings.TrimPrefix(l[3+end+3:], " ")
	}
	return m
}

func TestFuncHeadingRule(t *testing.T) {
	old := splitLines([]byte("package p\n\nfunc f() {\n\tx\n   y\n\t}\n1x\n"))
	for _, tt := range []struct {
		h    Hunk
		want string
	}{
		{Hunk{OldStart: 1, OldLines: 1}, ""},
		{Hunk{OldStart: 5, OldLines: 1}, "func f() {"},
		{Hunk{OldStart: 3, OldLines: 1}, "package p"},
		{Hunk{OldStart: 7, OldLines: 0}, "func f() {"},
		{Hunk{OldStart: 0, OldLines: 0}, ""},
	} {
		if got := FuncHeading(old, tt.h); got != tt.want {
			t.Errorf("FuncHeading(%+v) = %q, want %q", tt.h, got, tt.want)
		}
	}
}
