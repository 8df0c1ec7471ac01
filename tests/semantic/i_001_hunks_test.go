package semantic

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestI001HunksLiteralSelector checks I-001 for apply --hunks: the single
// --path is a selector, so a name holding wildcard characters (and bytes
// that are not UTF-8) is given with them escaped, as for every other
// selector; the hunks land on exactly that file. wtx diff --hunks --path
// takes the same selector.
func TestI001HunksLiteralSelector(t *testing.T) {
	t.Parallel()
	ws, state := t.TempDir(), t.TempDir()
	name := "h\xff[1]*"
	sel := "h\xff\\[1]\\*"
	var lines []string
	for i := 1; i <= 30; i++ {
		lines = append(lines, strings.Repeat("x", i))
	}
	base := strings.Join(lines, "\n") + "\n"
	for _, n := range []string{name, "h\xff1"} { // h\xff1 is what the unescaped glob would match
		if err := os.WriteFile(filepath.Join(ws, n), []byte(base), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := runWtx(t, ws, state, "run", "--backend", "copy", "--name", "h", "--", "sh", "-c",
		`for f in "$1" "$2"; do sed -i 's/^xxxxx$/FIVE/; s/^xxxxxxxxxxxxxxxxxxxxxxxxx$/TWENTYFIVE/' "$f"; done`, "sh", name, "h\xff1")
	if r.code != 0 {
		t.Fatalf("wtx run: %v", r)
	}
	if r := runWtx(t, ws, state, "diff", "h", "--hunks", "--path", sel); r.code != 0 || !strings.Contains(r.stdout, "+FIVE") {
		t.Fatalf("wtx diff --hunks --path %q: %v", sel, r)
	}
	if r := runWtx(t, ws, state, "apply", "h", "--path", sel, "--hunks", "1"); r.code != 0 {
		t.Fatalf("wtx apply --path %q --hunks 1: %v", sel, r)
	}
	got, _ := os.ReadFile(filepath.Join(ws, name))
	if !strings.Contains(string(got), "\nFIVE\n") || strings.Contains(string(got), "TWENTYFIVE") {
		t.Errorf("%q after applying hunk 1: %q", name, got)
	}
	if other, _ := os.ReadFile(filepath.Join(ws, "h\xff1")); string(other) != base {
		t.Errorf("a file the selector does not name changed: %q", other)
	}
	if r := runWtx(t, ws, state, "apply", "h", "--path", "h\xff*", "--hunks", "1"); r.code != 1 || !strings.Contains(r.stderr, "2 changed files") {
		t.Errorf("a selector naming two files must be refused as a usage error: %v", r)
	}
}
