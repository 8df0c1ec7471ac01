package mcpserve_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The diff and apply tools take exclude, as the command line does: the
// excluded path stays staged, and a selector that matches nothing is an
// error (not-found.path) rather than an empty apply.
func TestMCPExclude(t *testing.T) {
	cs, ws := session(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	var begin struct{ Tx string }
	if e := call(t, cs, "begin", map[string]any{}, &begin); e != "" {
		t.Fatal(e)
	}
	for _, p := range []string{"a.txt", "b.txt"} {
		if e := call(t, cs, "write", map[string]any{"tx": begin.Tx, "path": p, "content": "new\n"}, nil); e != "" {
			t.Fatalf("write %s: %s", p, e)
		}
	}
	var diff struct{ Diff string }
	if e := call(t, cs, "diff", map[string]any{"tx": begin.Tx, "exclude": []string{"b.txt"}}, &diff); e != "" || strings.Contains(diff.Diff, "b.txt") || !strings.Contains(diff.Diff, "a.txt") {
		t.Fatalf("diff with exclude: %s %q", e, diff.Diff)
	}
	if e := call(t, cs, "apply", map[string]any{"tx": begin.Tx, "exclude": []string{"nonexist"}}, nil); !strings.Contains(e, "not-found.path") {
		t.Fatalf("an exclude that matches nothing: %q", e)
	}
	if e := call(t, cs, "apply", map[string]any{"tx": begin.Tx, "exclude": []string{"b.txt"}}, nil); e != "" {
		t.Fatalf("apply with exclude: %s", e)
	}
	a, _ := os.ReadFile(filepath.Join(ws, "a.txt"))
	b, _ := os.ReadFile(filepath.Join(ws, "b.txt"))
	if string(a) != "new\n" || string(b) != "b\n" {
		t.Fatalf("after apply with exclude b.txt: a=%q b=%q", a, b)
	}
}
