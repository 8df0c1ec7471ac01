package textdiff

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestMerge3Table(t *testing.T) {
	base := "a\nb\nc\nd\ne\nf\n"
	tests := []struct {
		name, ours, theirs, want string
		conflict                 bool
	}{
		{"only ours", "a\nB\nc\nd\ne\nf\n", base, "a\nB\nc\nd\ne\nf\n", false},
		{"only theirs", base, "a\nb\nc\nd\ne\nF\n", "a\nb\nc\nd\ne\nF\n", false},
		{"separate", "A\nb\nc\nd\ne\nf\n", "a\nb\nc\nd\ne\nF\n", "A\nb\nc\nd\ne\nF\n", false},
		{"same change", "a\nX\nc\nd\ne\nf\n", "a\nX\nc\nd\ne\nf\n", "a\nX\nc\nd\ne\nf\n", false},
		{"same line differently", "a\nX\nc\nd\ne\nf\n", "a\nY\nc\nd\ne\nf\n", "", true},
		{"adjacent lines", "a\nX\nc\nd\ne\nf\n", "a\nb\nY\nd\ne\nf\n", "", true},
		{"insert vs delete around", "a\nb\nc\nd\ne\nf\nz\n", "a\nc\nd\ne\nf\n", "a\nc\nd\ne\nf\nz\n", false},
		{"both insert at same point", "a\nb\nX\nc\nd\ne\nf\n", "a\nb\nY\nc\nd\ne\nf\n", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, cf := Merge3([]byte(base), []byte(tt.ours), []byte(tt.theirs))
			if (len(cf) > 0) != tt.conflict {
				t.Fatalf("conflicts %v, want conflict=%v", cf, tt.conflict)
			}
			if !tt.conflict && string(got) != tt.want {
				t.Fatalf("merged %q, want %q", got, tt.want)
			}
		})
	}
}

// TestMerge3AgainstGit compares clean merges with git merge-file: when git
// merges cleanly and we do too, the texts are equal; when we merge cleanly,
// git does too (we are never more permissive than git).
func TestMerge3AgainstGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	rng := rand.New(rand.NewPCG(7, 11))
	dir := t.TempDir()
	mutate := func(lines []string) []string {
		out := append([]string(nil), lines...)
		for range 1 + rng.IntN(3) {
			i := rng.IntN(len(out) + 1)
			switch rng.IntN(3) {
			case 0:
				out = append(out[:i], append([]string{"new" + string(rune('a'+rng.IntN(26))) + "\n"}, out[i:]...)...)
			case 1:
				if i < len(out) {
					out = append(out[:i], out[i+1:]...)
				}
			case 2:
				if i < len(out) {
					out[i] = "chg" + string(rune('a'+rng.IntN(26))) + "\n"
				}
			}
		}
		return out
	}
	agreeClean := 0
	for n := range 300 {
		var base []string
		for i := range 20 {
			base = append(base, "line"+string(rune('a'+i))+"\n")
		}
		ours, theirs := mutate(base), mutate(base)
		b, o, th := strings.Join(base, ""), strings.Join(ours, ""), strings.Join(theirs, "")
		write := func(name, s string) string {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}
		po, pb, pt := write("o", o), write("b", b), write("t", th)
		out, err := exec.Command("git", "merge-file", "-p", po, pb, pt).Output()
		gitClean := err == nil
		got, cf := Merge3([]byte(b), []byte(o), []byte(th))
		if len(cf) == 0 {
			if !gitClean {
				t.Fatalf("case %d: we merged cleanly where git conflicts\nbase %q\nours %q\ntheirs %q\ngot %q", n, b, o, th, got)
			}
			if string(got) != string(out) {
				t.Fatalf("case %d: merge differs from git\nbase %q\nours %q\ntheirs %q\ngot %q\ngit %q", n, b, o, th, got, out)
			}
			agreeClean++
		}
	}
	if agreeClean < 100 {
		t.Fatalf("only %d of 300 random merges were clean; the generator should make more", agreeClean)
	}
	t.Logf("%d of 300 random merges clean and identical to git merge-file", agreeClean)
}

func TestMerge3Marked(t *testing.T) {
	base := "a\nb\nc\nd\ne\n"
	ours := "a\nB1\nc\nd\nE\n"
	theirs := "a\nB2\nc\nd\ne\n"
	got, conflicts := Merge3Marked([]byte(base), []byte(ours), []byte(theirs), Labels{Ours: "stage", Base: "base", Theirs: "workspace"})
	want := "a\n<<<<<<< stage\nB1\n||||||| base\nb\n=======\nB2\n>>>>>>> workspace\nc\nd\nE\n"
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if len(conflicts) != 1 || conflicts[0] != (Conflict{Start: 2, End: 2}) {
		t.Fatalf("conflicts %#v", conflicts)
	}
	// Without a conflict it is Merge3.
	clean, none := Merge3Marked([]byte(base), []byte(ours), []byte(base), Labels{})
	if string(clean) != ours || none != nil {
		t.Fatalf("clean merge: %q %v", clean, none)
	}
	// A last line without a newline still leaves every marker at the
	// start of a line.
	got, _ = Merge3Marked([]byte("x"), []byte("y"), []byte("z"), Labels{Ours: "o", Base: "b", Theirs: "t"})
	if want := "<<<<<<< o\ny\n||||||| b\nx\n=======\nz\n>>>>>>> t\n"; string(got) != want {
		t.Fatalf("no newline: got %q want %q", got, want)
	}
}
