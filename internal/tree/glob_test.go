package tree

import (
	"math/rand/v2"
	"path"
	"testing"
	"unicode/utf8"
)

// On valid UTF-8, globMatch answers as path.Match does.
func TestGlobAgreesWithPathMatch(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alpha := []string{"a", "b", ".", "é", "\uFFFD", "*", "?", "[", "]", "^", "-", "\\", "k"}
	gen := func(n int) string {
		s := ""
		for i := 0; i < n; i++ {
			s += alpha[r.IntN(len(alpha))]
		}
		return s
	}
	for i := 0; i < 20000; i++ {
		pat, name := gen(r.IntN(6)), gen(r.IntN(6))
		want, werr := path.Match(pat, name)
		got, gerr := globMatch(pat, name)
		if want != got || (werr == nil) != (gerr == nil) {
			t.Fatalf("%q vs %q: path.Match %v %v, globMatch %v %v", pat, name, want, werr, got, gerr)
		}
	}
}

func TestGlobOnBytes(t *testing.T) {
	for _, tt := range []struct {
		pat, name string
		want      bool
	}{
		{"*.key", "secret\xff.key", true},
		{"conf\xff", "conf\xff", true},
		{"conf\xff", "conf\xfe", false},
		{"conf\xff", "conf\uFFFD", false},
		{"conf\uFFFD", "conf\xff", false},
		{"conf\uFFFD", "conf\uFFFD", true},
		{"?", "\xff", true},
		{"?", "é", true},
		{"??", "é", false},
		{"?", "\xff\xfe", false},
		{"??", "\xff\xfe", true},
		{"[\xff]", "\xfe", false},
		{"[\xff]", "\xff", true},
		{"[\x80-\xff]", "\xfe", true},
		{"[a-z]", "\xfe", false},
		{"[^a]", "\xfe", true},
		{"x*", "x\x00\x01\n", true},
	} {
		got, err := globMatch(tt.pat, tt.name)
		if err != nil || got != tt.want {
			t.Errorf("globMatch(%q, %q) = %v, %v; want %v", tt.pat, tt.name, got, err, tt.want)
		}
	}
	if !utf8.ValidString("é") {
		t.Fatal("test file is not UTF-8")
	}
}
