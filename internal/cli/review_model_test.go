package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/wtx-dev/wtx"
)

// stageWith opens a workspace holding base and a copy stage that writes
// staged over it; it returns the workspace's path and the stage.
func stageWith(t *testing.T, base, staged map[string]string) (string, *wtx.Stage) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	for p, c := range base {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(ws, 0o755)
	w, err := wtx.Open(ctx, ws, wtx.Options{StateDir: filepath.Join(dir, "state")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	st, err := w.Begin(ctx, wtx.BeginOptions{Backend: "copy"})
	if err != nil {
		t.Fatal(err)
	}
	for p, c := range staged {
		if _, err := st.Write(ctx, p, []byte(c), wtx.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return ws, st
}

func sized(t *testing.T, st *wtx.Stage, w, h int) tea.Model {
	t.Helper()
	m := tea.Model(newReviewModel(context.Background(), st, false))
	m, _ = m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	m, _ = m.Update(m.(reviewModel).load())
	return m
}

// Tabs are expanded to the same stops on unchanged and changed lines: the
// diff's first column (+, - or space) is the diff's own, and stops count
// from the content after it, so "\tfoo" lines up whatever its marker.
func TestReviewTabsExpandConsistently(t *testing.T) {
	_, st := stageWith(t, map[string]string{"m.go": "func f() {\n\tif x {\n\t\tfoo()\n\t}\n}\n"},
		map[string]string{"m.go": "func f() {\n\tif y {\n\t\tfoo()\n\t}\n}\n"})
	v := screen(sized(t, st, 80, 24))
	for _, want := range []string{
		"-" + strings.Repeat(" ", 8) + "if x {",
		"+" + strings.Repeat(" ", 8) + "if y {",
		" " + strings.Repeat(" ", 16) + "foo()",
		" " + strings.Repeat(" ", 8) + "}",
	} {
		if !strings.Contains(v, "\n"+want+"\n") {
			t.Errorf("view lacks the line %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "\t") {
		t.Errorf("a tab reached the screen:\n%q", v)
	}
}

// expandLine makes every byte visible and even: tab stops from the given
// column, control characters and invalid UTF-8 as escapes.
func TestExpandLine(t *testing.T) {
	tests := []struct{ in, want string }{
		{"\tx", "        x"},
		{"ab\tx", "ab      x"},
		{"\x1b[2Jboom", "^[[2Jboom"},
		{"a\rb", "a^Mb"},
		{"bad\xff", `bad\xff`},
		{"rtl\u202eevil", `rtl\u202eevil`},
		{"\u00e9\tx", "\u00e9       x"},
	}
	for _, tt := range tests {
		if got := expandLine(tt.in, 0); got != tt.want {
			t.Errorf("expandLine(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// A change past the right edge is marked (›) and reached with → (l); w
// wraps it instead.
func TestReviewLongLineScrollsAndWraps(t *testing.T) {
	long := strings.Repeat("0", 150) + " END-CHANGE\n"
	_, st := stageWith(t, map[string]string{"l.txt": "short\n"}, map[string]string{"l.txt": long})
	m := sized(t, st, 80, 24)
	v := screen(m)
	if strings.Contains(v, "END-CHANGE") || !strings.Contains(v, "0›\n") {
		t.Fatalf("the cut line should end in ›, the change beyond the edge:\n%s", v)
	}
	right := drive(t, m, strings.Split(strings.Repeat("l", 20), "")...)
	if v := screen(right); !strings.Contains(v, "END-CHANGE") || !strings.Contains(v, "‹") || !strings.Contains(v, "column ") {
		t.Errorf("after → the end of the line should show:\n%s", v)
	}
	if v := screen(drive(t, right, "h", "h", "h", "h", "h", "h", "h", "h", "h", "h", "h", "h", "h", "h", "h", "h", "h", "h", "h", "h", "h")); strings.Contains(v, "‹") {
		t.Errorf("← back to the start should show the start:\n%s", v)
	}
	wrapped := screen(drive(t, m, "w"))
	if !strings.Contains(strings.ReplaceAll(wrapped, "\n", ""), "END-CHANGE") || !strings.Contains(wrapped, "wrapped") {
		t.Errorf("w should wrap the line:\n%s", wrapped)
	}
	for _, l := range strings.Split(wrapped, "\n") {
		if w := len([]rune(l)); w > 80 {
			t.Errorf("a row is %d columns wide: %q", w, l)
		}
	}
}

// Protected paths are marked with !, A refuses to start without p, and
// with p the apply lands them.
func TestReviewProtectedApprove(t *testing.T) {
	ws, st := stageWith(t, map[string]string{".git/HEAD": "ref: refs/heads/main\n", "a.txt": "a\n"},
		map[string]string{".git/HEAD": "ref: refs/heads/x\n", "a.txt": "A\n"})
	m := sized(t, st, 80, 24)
	v := screen(m)
	if !strings.Contains(v, "[x]!M .git/HEAD") || !strings.Contains(v, "protected: under .git") || !strings.Contains(v, "p approves") {
		t.Fatalf("the protected path is not marked:\n%s", v)
	}
	m = drive(t, m, "A")
	if v := screen(m); !strings.Contains(v, "1 selected path(s) are protected: p approves them, s skips them") {
		t.Fatalf("A with a protected path selected should ask for p:\n%s", v)
	}
	if got := read(t, ws, ".git/HEAD"); got != "ref: refs/heads/main\n" {
		t.Fatalf(".git/HEAD written without approval: %q", got)
	}
	m = drive(t, m, "p", "A")
	if v := screen(m); !strings.Contains(v, "1 protected (approved)") {
		t.Fatalf("the prompt should say the protected path is approved:\n%s", v)
	}
	m = drive(t, m, "y")
	if got := read(t, ws, ".git/HEAD"); got != "ref: refs/heads/x\n" {
		t.Errorf("approved .git/HEAD did not land: %q\n%s", got, screen(m))
	}
}

// Skipping the protected path applies the rest without approval.
func TestReviewProtectedSkip(t *testing.T) {
	ws, st := stageWith(t, map[string]string{".git/HEAD": "ref: refs/heads/main\n", "a.txt": "a\n"},
		map[string]string{".git/HEAD": "ref: refs/heads/x\n", "a.txt": "A\n"})
	m := drive(t, sized(t, st, 80, 24), "s", "A", "y")
	if read(t, ws, "a.txt") != "A\n" || read(t, ws, ".git/HEAD") != "ref: refs/heads/main\n" {
		t.Errorf("a.txt alone should land:\n%s", screen(m))
	}
}

// The list uses the height it has and says which file of how many; / finds
// a path or a diff line; g and G go to the ends; the key hints at 80
// columns show A, D, ? and q.
func TestReviewListSearchJumpsHints(t *testing.T) {
	base, staged := map[string]string{}, map[string]string{}
	for i := 0; i < 40; i++ {
		p := fmt.Sprintf("f%02d.txt", i)
		base[p] = "old\n"
		staged[p] = fmt.Sprintf("new %d\n", i)
	}
	staged["f17.txt"] = "needle here\n"
	_, st := stageWith(t, base, staged)
	m := sized(t, st, 160, 45)
	v := screen(m)
	rows := strings.Count(v, "] M f")
	if rows < 20 {
		t.Errorf("the list shows %d rows of 45:\n%s", rows, v)
	}
	if !strings.Contains(v, "1 of 40 (rows 1-") {
		t.Errorf("no n of m:\n%s", v)
	}
	m = drive(t, m, "G")
	if v := screen(m); !strings.Contains(v, "40 of 40") || !strings.Contains(v, "f39.txt b/f39.txt") {
		t.Errorf("G should go to the last file:\n%s", v)
	}
	m = drive(t, m, "g")
	if v := screen(m); !strings.Contains(v, " 1 of 40") {
		t.Errorf("g should go to the first file:\n%s", v)
	}
	m = drive(t, m, "/", "n", "e", "e", "d", "l", "e")
	if v := screen(m); !strings.Contains(v, "/needle█") {
		t.Errorf("the search line should show what is typed:\n%s", v)
	}
	m, _ = m.Update(tea.KeyPressMsg{Code: tea.KeyEnter})
	if v := screen(m); !strings.Contains(v, "18 of 40") || !strings.Contains(v, "+needle here") {
		t.Errorf("/needle should find f17.txt's diff:\n%s", v)
	}
	m = drive(t, m, "/")
	m, _ = m.Update(tea.KeyPressMsg{Code: tea.KeyEnter})
	if v := screen(m); !strings.Contains(v, "18 of 40") {
		t.Errorf("an empty search repeats the last, and f17.txt is the only match:\n%s", v)
	}
	m = drive(t, m, "/", "z", "z")
	m, _ = m.Update(tea.KeyPressMsg{Code: tea.KeyEnter})
	if v := screen(m); !strings.Contains(v, "/zz: no path or diff line holds it") {
		t.Errorf("a search without a match should say so:\n%s", v)
	}

	narrow := screen(sized(t, st, 80, 24))
	lines := strings.Split(strings.TrimRight(narrow, "\n"), "\n")
	if len(lines) > 24 {
		t.Errorf("the screen has %d lines at 24 rows", len(lines))
	}
	hints := lines[len(lines)-1]
	for _, want := range []string{"A apply", "D drop", "? help", "q quit"} {
		if !strings.Contains(hints, want) {
			t.Errorf("the key hints at 80 columns lack %q: %q", want, hints)
		}
	}
	for _, l := range lines {
		if w := len([]rune(l)); w > 80 {
			t.Errorf("a line is %d columns wide at 80: %q", w, l)
		}
	}
}

// A file of the selection shown that left the change set meanwhile makes
// the review's apply refuse as changed since it was reviewed, writing
// nothing.
func TestReviewApplyAfterAFileLeft(t *testing.T) {
	ws, st := stageWith(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"}, map[string]string{"a.txt": "A\n", "b.txt": "B\n"})
	m := sized(t, st, 80, 24)
	if _, err := st.Write(context.Background(), "b.txt", []byte("b\n"), wtx.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	m = drive(t, m, "A", "y")
	if v := screen(m); !strings.Contains(v, "changed since it was reviewed") || read(t, ws, "a.txt") != "a\n" {
		t.Errorf("the apply should be refused as changed since review, a.txt unwritten:\n%s", v)
	}
}
