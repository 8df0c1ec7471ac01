package textdiff

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLines(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"a", []string{"a"}},
		{"a\n", []string{"a\n"}},
		{"a\nb", []string{"a\n", "b"}},
		{"\n\n", []string{"\n", "\n"}},
		{"a\r\nb\r\n", []string{"a\r\n", "b\r\n"}},
		{"a\rb", []string{"a\rb"}},
	}
	for _, tt := range tests {
		got := Lines([]byte(tt.in))
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Lines(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestIsBinary(t *testing.T) {
	long := bytes.Repeat([]byte("x"), binarySniffLen)
	tests := []struct {
		name string
		in   []byte
		want bool
	}{
		{"empty", nil, false},
		{"text", []byte("hello\n"), false},
		{"utf8", []byte("caf\xc3\xa9\n"), false},
		{"nul first", []byte{0, 'a'}, true},
		{"nul last sniffed", append(long[:binarySniffLen-1:binarySniffLen-1], 0), true},
		{"nul past sniff", append(long[:binarySniffLen:binarySniffLen], 0), false},
	}
	for _, tt := range tests {
		if got := IsBinary(tt.in); got != tt.want {
			t.Errorf("%s: IsBinary = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// render prints hunks in unified form, for compact expectations.
func render(hs []Hunk) string {
	var sb strings.Builder
	for _, h := range hs {
		fmt.Fprintf(&sb, "@@ -%d,%d +%d,%d @@\n", h.OldStart, h.OldLines, h.NewStart, h.NewLines)
		for _, l := range h.Lines {
			sb.WriteByte(l.Kind)
			sb.WriteString(strings.TrimSuffix(l.Text, "\n"))
			if !strings.HasSuffix(l.Text, "\n") {
				sb.WriteString("$")
			}
			sb.WriteByte('\n')
		}
	}
	return sb.String()
}

func TestDiffHunks(t *testing.T) {
	tests := []struct {
		name    string
		a, b    string
		context int
		want    string
	}{
		{"equal", "a\nb\n", "a\nb\n", 3, ""},
		{"new file", "", "a\nb\n", 3, "@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{"deleted", "a\n", "", 3, "@@ -1,1 +0,0 @@\n-a\n"},
		{"replace middle", "a\nb\nc\n", "a\nB\nc\n", 1, "@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"},
		{"insert top no context", "a\n", "z\na\n", 0, "@@ -0,0 +1,1 @@\n+z\n"},
		{"insert after line no context", "a\nb\n", "a\nz\nb\n", 0, "@@ -1,0 +2,1 @@\n+z\n"},
		{"delete no context", "a\nb\nc\n", "a\nc\n", 0, "@@ -2,1 +1,0 @@\n-b\n"},
		{"add final newline", "a\nb", "a\nb\n", 3, "@@ -1,2 +1,2 @@\n a\n-b$\n+b\n"},
		{"drop final newline", "a\n", "a", 3, "@@ -1,1 +1,1 @@\n-a\n+a$\n"},
		{"crlf change", "a\r\nb\r\n", "a\r\nb\n", 0, "@@ -2,1 +2,1 @@\n-b\r\n+b\n"},
		{"two hunks", "1\n2\n3\n4\n5\n6\n7\n8\n", "X\n2\n3\n4\n5\n6\n7\nY\n", 2,
			"@@ -1,3 +1,3 @@\n-1\n+X\n 2\n 3\n@@ -6,3 +6,3 @@\n 6\n 7\n-8\n+Y\n"},
		{"merged when context touches", "1\n2\n3\n4\n5\n6\n", "X\n2\n3\n4\n5\nY\n", 2,
			"@@ -1,6 +1,6 @@\n-1\n+X\n 2\n 3\n 4\n 5\n-6\n+Y\n"},
	}
	for _, tt := range tests {
		got := render(Diff([]byte(tt.a), []byte(tt.b), tt.context))
		if got != tt.want {
			t.Errorf("%s:\ngot:\n%s\nwant:\n%s", tt.name, got, tt.want)
		}
	}
}

// randText builds a text of n lines drawn from a small vocabulary, so that
// texts share many lines, with the variations the diff must survive.
func randText(r *rand.Rand, n int) []byte {
	var sb strings.Builder
	for i := 0; i < n; i++ {
		switch r.IntN(20) {
		case 0:
			sb.WriteString("\n")
			continue
		case 1:
			sb.WriteString(strings.Repeat("long", 500+r.IntN(2000)))
		case 2:
			fmt.Fprintf(&sb, "w%d\r", r.IntN(4))
		default:
			fmt.Fprintf(&sb, "w%d", r.IntN(8))
		}
		sb.WriteString("\n")
	}
	s := sb.String()
	if len(s) > 0 && r.IntN(3) == 0 {
		s = s[:len(s)-1] // no final newline
	}
	return []byte(s)
}

// mutate edits a copy of a in a few random places.
func mutate(r *rand.Rand, a []byte) []byte {
	ls := Lines(a)
	out := append([]string(nil), ls...)
	for n := r.IntN(6); n > 0; n-- {
		p := r.IntN(len(out) + 1)
		switch r.IntN(3) {
		case 0:
			out = append(out[:p], append([]string{fmt.Sprintf("w%d\n", r.IntN(10))}, out[p:]...)...)
		case 1:
			if p < len(out) {
				out = append(out[:p], out[p+1:]...)
			}
		case 2:
			if p < len(out) {
				out[p] = fmt.Sprintf("n%d\n", r.IntN(3))
			}
		}
	}
	s := strings.Join(out, "")
	if len(s) > 0 && r.IntN(4) == 0 {
		if s[len(s)-1] == '\n' {
			s = s[:len(s)-1]
		} else {
			s += "\n"
		}
	}
	return []byte(s)
}

// lcs is the textbook quadratic longest common subsequence length.
func lcs(a, b []string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for i := range a {
		for j := range b {
			if a[i] == b[j] {
				cur[j+1] = prev[j] + 1
			} else {
				cur[j+1] = max(prev[j+1], cur[j])
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func countChanged(hs []Hunk) (ins, del int) {
	for _, h := range hs {
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

func checkHeaders(t *testing.T, hs []Hunk) {
	t.Helper()
	for i, h := range hs {
		var old, nw int
		for _, l := range h.Lines {
			if l.Kind != Insert {
				old++
			}
			if l.Kind != Delete {
				nw++
			}
		}
		if old != h.OldLines || nw != h.NewLines {
			t.Fatalf("hunk %d: header -%d +%d, lines -%d +%d", i, h.OldLines, h.NewLines, old, nw)
		}
	}
}

func TestDiffApplyRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for c := 0; c < 3000; c++ {
		a := randText(r, r.IntN(40))
		var b []byte
		if r.IntN(5) == 0 {
			b = randText(r, r.IntN(40)) // unrelated text
		} else {
			b = mutate(r, a)
		}
		context := r.IntN(5)
		hs := Diff(a, b, context)
		checkHeaders(t, hs)
		got, err := Apply(a, hs, nil)
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("case %d: Apply(a, Diff(a, b)) = %q, %v\na=%q\nb=%q", c, got, err, a, b)
		}

		// Small inputs never hit the cost bound: the script is minimal.
		al, bl := Lines(a), Lines(b)
		ins, del := countChanged(hs)
		if want := len(al) + len(bl) - 2*lcs(al, bl); ins+del != want {
			t.Fatalf("case %d: %d changed lines, minimal is %d\na=%q\nb=%q", c, ins+del, want, a, b)
		}

		// Apply a random subset, then finish the job with a fresh diff.
		var sel []int
		for i := range hs {
			if r.IntN(2) == 0 {
				sel = append(sel, i)
			}
		}
		if sel == nil {
			sel = []int{}
		}
		mid, err := Apply(a, hs, sel)
		if err != nil {
			t.Fatalf("case %d: Apply subset %v: %v", c, sel, err)
		}
		if len(sel) == 0 && !bytes.Equal(mid, a) {
			t.Fatalf("case %d: empty selection changed the text", c)
		}
		rest := Diff(mid, b, context)
		got, err = Apply(mid, rest, nil)
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("case %d: second Apply = %q, %v, want %q", c, got, err, b)
		}
	}
}

func TestApplyErrors(t *testing.T) {
	a := []byte("a\nb\nc\n")
	hs := Diff(a, []byte("a\nB\nc\n"), 1)
	tests := []struct {
		name string
		text []byte
		sel  []int
		err  error
	}{
		{"changed line", []byte("a\nX\nc\n"), nil, ErrMismatch},
		{"too short", []byte("a\n"), nil, ErrMismatch},
		{"no final newline", []byte("a\nb\nc"), nil, ErrMismatch},
		{"bad index", a, []int{1}, nil},
	}
	for _, tt := range tests {
		_, err := Apply(tt.text, hs, tt.sel)
		if err == nil {
			t.Errorf("%s: Apply succeeded", tt.name)
			continue
		}
		if tt.err != nil && !errors.Is(err, tt.err) {
			t.Errorf("%s: error %v, want %v", tt.name, err, tt.err)
		}
	}
	if _, err := Apply(a, append(hs, hs...), nil); !errors.Is(err, ErrMismatch) {
		t.Errorf("overlapping hunks: error %v, want ErrMismatch", err)
	}
}

// numbered is a text of n distinct lines.
func numbered(n int) []string {
	ls := make([]string, n)
	for i := range ls {
		ls[i] = fmt.Sprintf("line %d of the original text\n", i)
	}
	return ls
}

// scatter applies k single-line edits (replace, insert or delete) at
// distinct random places and returns the new lines and the number of changed
// lines of the edit, an upper bound of the minimal one. With dup, new lines
// are copies of other lines of the text, which a diff cannot set aside as
// unmatched.
func scatter(r *rand.Rand, ls []string, k int, dup bool) ([]string, int) {
	newLine := func(what string, i int) string {
		if dup {
			return ls[r.IntN(len(ls))]
		}
		return fmt.Sprintf("%s %d\n", what, i)
	}
	at := map[int]int{}
	for len(at) < k {
		at[r.IntN(len(ls))] = r.IntN(3)
	}
	var out []string
	minimal := 0
	for i, s := range ls {
		op, ok := at[i]
		switch {
		case !ok:
			out = append(out, s)
		case op == 0:
			out = append(out, newLine("replaced", i))
			minimal += 2
		case op == 1:
			out = append(out, newLine("inserted", i), s)
			minimal++
		default:
			minimal++
		}
	}
	return out, minimal
}

func TestScatteredEditsStaySmall(t *testing.T) {
	for seed := uint64(0); seed < 6; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		dup := seed%2 == 1
		base := numbered(4000)
		// Repeated lines make the matching harder than distinct ones.
		for i := range base {
			if i%7 == 0 {
				base[i] = "}\n"
			}
		}
		next, _ := scatter(r, base, 100, dup)
		minimal := len(base) + len(next) - 2*lcs(base, next)
		a, b := []byte(strings.Join(base, "")), []byte(strings.Join(next, ""))
		hs := Diff(a, b, 3)
		ins, del := countChanged(hs)
		t.Logf("seed %d (dup %v): %d changed lines, minimal %d", seed, dup, ins+del, minimal)
		if ins+del > 2*minimal {
			t.Errorf("seed %d: %d changed lines, minimal %d", seed, ins+del, minimal)
		}
		if got, err := Apply(a, hs, nil); err != nil || !bytes.Equal(got, b) {
			t.Fatalf("seed %d: Apply failed: %v", seed, err)
		}
	}
}

func TestLargeDiff(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	base := numbered(80000)
	next, minimal := scatter(r, base, 2000, true)
	a, b := []byte(strings.Join(base, "")), []byte(strings.Join(next, ""))
	start := time.Now()
	hs := Diff(a, b, 3)
	elapsed := time.Since(start)
	ins, del := countChanged(hs)
	t.Logf("80,000 lines, 2,000 edits: %d hunks, %d changed lines (edit made %d) in %v", len(hs), ins+del, minimal, elapsed)
	if got, err := Apply(a, hs, nil); err != nil || !bytes.Equal(got, b) {
		t.Fatalf("Apply failed: %v", err)
	}
}

// TestCostBound makes the middle-snake search hit its cost limit, and checks
// the coarser answer is still exact.
func TestCostBound(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for c := 0; c < 20; c++ {
		n := 3000 + r.IntN(2000)
		var a, b strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&a, "%d\n", r.IntN(3))
			fmt.Fprintf(&b, "%d\n", r.IntN(3))
		}
		hs := Diff([]byte(a.String()), []byte(b.String()), 3)
		checkHeaders(t, hs)
		got, err := Apply([]byte(a.String()), hs, nil)
		if err != nil || got == nil && b.Len() > 0 || !bytes.Equal(got, []byte(b.String())) {
			t.Fatalf("case %d: Apply failed: %v", c, err)
		}
	}
}

func BenchmarkDiff(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	base := numbered(80000)
	next, _ := scatter(r, base, 2000, true)
	x, y := []byte(strings.Join(base, "")), []byte(strings.Join(next, ""))
	b.SetBytes(int64(len(x) + len(y)))
	b.ReportAllocs()
	for b.Loop() {
		Diff(x, y, 3)
	}
}
