package tree

import "testing"

func TestParseSelectorErrors(t *testing.T) {
	for _, s := range []string{
		"",
		"/",
		"/abs",
		"/abs/path",
		".",
		"./a",
		"a/.",
		"..",
		"../a",
		"a/../b",
		"a/..",
		"a//b",
		"//",
		"a//",
		"a\x00b",
		"[",
		"a/[b",
		"[]",
		"a/b\\",
		"[a-]x/y",
	} {
		if sel, err := ParseSelector(s); err == nil {
			t.Errorf("ParseSelector(%q) = %q, want an error", s, sel)
		}
	}
}

func TestParseSelectorValid(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a", "a"},
		{"a/", "a"},
		{"src/a.go", "src/a.go"},
		{"**", "**"},
		{"**/*.go", "**/*.go"},
		{"a/**/b", "a/**/b"},
		{"[abc]?x*", "[abc]?x*"},
		{"...", "..."},
		{".git", ".git"},
		{"a b/ c", "a b/ c"},
	} {
		sel, err := ParseSelector(tc.in)
		if err != nil {
			t.Errorf("ParseSelector(%q): %v", tc.in, err)
			continue
		}
		if sel.String() != tc.want {
			t.Errorf("ParseSelector(%q).String() = %q, want %q", tc.in, sel.String(), tc.want)
		}
	}
}

func TestSelectorMatch(t *testing.T) {
	for _, tc := range []struct {
		sel   string
		match []string
		miss  []string
	}{
		{"a.txt", []string{"a.txt"}, []string{"b.txt", "a.txtx", "xa.txt", "d/a.txt", "a"}},
		{"src", []string{"src", "src/a", "src/a/b", "src/.hidden"}, []string{"srcx", "srcx/a", "sr", "x/src", "src.go"}},
		{"src/", []string{"src", "src/a/b"}, []string{"srcx"}},
		{"src/a", []string{"src/a", "src/a/b/c"}, []string{"src", "src/b", "src/ab", "a"}},
		{"*", []string{"a", "b/c", ".x", "x/y/z"}, nil},
		{"*.go", []string{"a.go", ".go", "a.go/x"}, []string{"a.gox", "d/a.go", "ago"}},
		{"src/*.go", []string{"src/a.go", "src/a.go/x"}, []string{"src/d/a.go", "a.go", "src/a.c"}},
		{"a*c", []string{"ac", "abc", "abbc"}, []string{"ab/c", "a/c", "abcd"}},
		{"a?c", []string{"abc", "a.c"}, []string{"ac", "abbc", "a/c"}},
		{"?", []string{"a", "b/c"}, []string{"ab", ""}},
		{"[ab].txt", []string{"a.txt", "b.txt"}, []string{"c.txt", "ab.txt"}},
		{"[^ab].txt", []string{"c.txt"}, []string{"a.txt", "b.txt"}},
		{"[a-c]", []string{"a", "b", "c/d"}, []string{"d", "ab"}},
		{"**", []string{"a", "a/b", "a/b/c"}, nil},
		{"**/a.go", []string{"a.go", "x/a.go", "x/y/a.go", "x/y/a.go/z"}, []string{"a.gox", "x/ba.go", "x/y"}},
		{"**/*.go", []string{"a.go", "x/y/b.go"}, []string{"x/y/b.c", "x/y"}},
		{"a/**/b", []string{"a/b", "a/x/b", "a/x/y/b", "a/x/b/c"}, []string{"a", "a/x", "b", "x/a/b", "a/bx"}},
		{"a/**", []string{"a", "a/b", "a/b/c"}, []string{"ab", "b/a"}},
		{"a/**/**/b", []string{"a/b", "a/x/y/b"}, []string{"a/x"}},
		{"**/x/**", []string{"x", "a/x", "a/x/b", "a/b/x/c/d"}, []string{"a/xy", "xa/b"}},
		{"*/b", []string{"a/b", "x/b/c"}, []string{"b", "a/c/b", "a/x/b"}},
		{"\\*", []string{"*", "*/a"}, []string{"a"}},
	} {
		sel, err := ParseSelector(tc.sel)
		if err != nil {
			t.Fatalf("ParseSelector(%q): %v", tc.sel, err)
		}
		for _, p := range tc.match {
			if !sel.Match(p) {
				t.Errorf("%q.Match(%q) = false, want true", tc.sel, p)
			}
		}
		for _, p := range tc.miss {
			if sel.Match(p) {
				t.Errorf("%q.Match(%q) = true, want false", tc.sel, p)
			}
		}
	}
}

func TestSelectorZeroValueMatchesNothing(t *testing.T) {
	var sel Selector
	for _, p := range []string{"a", "", "a/b"} {
		if sel.Match(p) {
			t.Errorf("zero Selector matches %q", p)
		}
	}
}

func TestSelectors(t *testing.T) {
	ss, err := ParseSelectors([]string{"src", "**/*.md", "bin/"})
	if err != nil {
		t.Fatal(err)
	}
	if got := ss.Strings(); len(got) != 3 || got[0] != "src" || got[1] != "**/*.md" || got[2] != "bin" {
		t.Errorf("Strings() = %q", got)
	}
	for _, tc := range []struct {
		p    string
		want bool
	}{
		{"src/x.go", true},
		{"doc/a.md", true},
		{"bin", true},
		{"doc/a.txt", false},
		{"binx", false},
	} {
		if got := ss.Match(tc.p); got != tc.want {
			t.Errorf("Selectors.Match(%q) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if (Selectors{}).Match("a") {
		t.Error("empty Selectors matches a path")
	}
	if _, err := ParseSelectors([]string{"ok", "../bad"}); err == nil {
		t.Error("ParseSelectors accepted a bad member")
	}
}
