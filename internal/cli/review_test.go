package cli

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/quote"
)

// reviewFixture opens a workspace with a.txt (30 lines), b.txt and
// gone.txt, and a copy stage that changes lines 2 and 28 of a.txt, rewrites
// b.txt and deletes gone.txt.
func reviewFixture(t *testing.T) (string, *wtx.Stage) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	var lines []string
	for i := 1; i <= 30; i++ {
		lines = append(lines, strings.Repeat("x", i%7)+string(rune('a'+i%26)))
	}
	orig := strings.Join(lines, "\n") + "\n"
	write := func(p, s string) {
		if err := os.WriteFile(filepath.Join(ws, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.txt", orig)
	write("b.txt", "old\n")
	write("gone.txt", "bye\n")
	w, err := wtx.Open(ctx, ws, wtx.Options{StateDir: filepath.Join(dir, "state")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	st, err := w.Begin(ctx, wtx.BeginOptions{Backend: "copy"})
	if err != nil {
		t.Fatal(err)
	}
	lines[1], lines[27] = "TWO", "TWENTY-EIGHT"
	if _, err := st.Write(ctx, "a.txt", []byte(strings.Join(lines, "\n")+"\n"), wtx.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write(ctx, "b.txt", []byte("new\n"), wtx.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Remove(ctx, "gone.txt", ""); err != nil {
		t.Fatal(err)
	}
	return ws, st
}

var ansiRE = regexp.MustCompile("\x1b\\[[0-9;]*m")

// drive feeds keys to the model, running every command it returns (and the
// commands those messages return) to completion, as the program would.
func drive(t *testing.T, m tea.Model, keys ...string) tea.Model {
	t.Helper()
	var run func(cmd tea.Cmd)
	run = func(cmd tea.Cmd) {
		if cmd == nil {
			return
		}
		msg := cmd()
		if _, quit := msg.(tea.QuitMsg); quit || msg == nil {
			return
		}
		var next tea.Cmd
		m, next = m.Update(msg)
		run(next)
	}
	for _, k := range keys {
		var msg tea.KeyPressMsg
		switch k {
		case "tab":
			msg = tea.KeyPressMsg{Code: tea.KeyTab}
		case "space":
			msg = tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
		case "down":
			msg = tea.KeyPressMsg{Code: tea.KeyDown}
		default:
			msg = tea.KeyPressMsg{Code: rune(k[0]), Text: k}
		}
		var cmd tea.Cmd
		m, cmd = m.Update(msg)
		run(cmd)
	}
	return m
}

func startReview(t *testing.T, st *wtx.Stage) tea.Model {
	t.Helper()
	m := tea.Model(newReviewModel(context.Background(), st, false))
	m, _ = m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	m, _ = m.Update(m.(reviewModel).load())
	return m
}

func screen(m tea.Model) string { return ansiRE.ReplaceAllString(m.View().Content, "") }

func read(t *testing.T, ws, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ws, p))
	if err != nil {
		return "<absent>"
	}
	return string(b)
}

func TestReviewFlows(t *testing.T) {
	tests := []struct {
		name  string
		keys  []string
		check func(t *testing.T, ws string, st *wtx.Stage, view string)
	}{
		{"lists every change, deletions included", nil, func(t *testing.T, ws string, st *wtx.Stage, view string) {
			for _, want := range []string{"[x] M a.txt", "2/2 hunks", "[x] M b.txt", "[x] D gone.txt  deleted file", "-1 deleted", "selected 3/3"} {
				if !strings.Contains(view, want) {
					t.Errorf("view lacks %q:\n%s", want, view)
				}
			}
		}},
		{"apply everything", []string{"A", "y"}, func(t *testing.T, ws string, st *wtx.Stage, view string) {
			if got := read(t, ws, "b.txt"); got != "new\n" {
				t.Errorf("b.txt = %q", got)
			}
			if got := read(t, ws, "gone.txt"); got != "<absent>" {
				t.Errorf("gone.txt = %q", got)
			}
			if !strings.Contains(view, "the stage is settled") {
				t.Errorf("view:\n%s", view)
			}
		}},
		{"skip a file", []string{"down", "s", "A", "y"}, func(t *testing.T, ws string, st *wtx.Stage, view string) {
			if got := read(t, ws, "b.txt"); got != "old\n" {
				t.Errorf("skipped b.txt landed: %q", got)
			}
			if strings.Contains(read(t, ws, "a.txt"), "TWO") == false {
				t.Errorf("a.txt did not land")
			}
			if !strings.Contains(view, "[ ] M b.txt") || strings.Contains(view, "a.txt") {
				t.Errorf("after the apply only b.txt should be left, still skipped:\n%s", view)
			}
		}},
		// A skipped file stays skipped after a partial apply: the next A
		// has nothing to apply and b.txt never lands.
		{"skipped stays skipped", []string{"down", "s", "A", "y", "A", "y"}, func(t *testing.T, ws string, st *wtx.Stage, view string) {
			if got := read(t, ws, "b.txt"); got != "old\n" {
				t.Errorf("the second A applied the skipped b.txt: %q", got)
			}
			if !strings.Contains(view, "nothing selected") {
				t.Errorf("view:\n%s", view)
			}
		}},
		{"skip a hunk", []string{"tab", "down", "space", "A", "y"}, func(t *testing.T, ws string, st *wtx.Stage, view string) {
			a := read(t, ws, "a.txt")
			if !strings.Contains(a, "TWO\n") || strings.Contains(a, "TWENTY-EIGHT") {
				t.Errorf("a.txt should hold hunk 1 only:\n%s", a)
			}
			if !strings.Contains(view, "[ ] M a.txt  0/1 hunks") {
				t.Errorf("the skipped hunk should stay staged:\n%s", view)
			}
		}},
		{"select nothing then one", []string{"n", "down", "y", "A", "y"}, func(t *testing.T, ws string, st *wtx.Stage, view string) {
			if read(t, ws, "b.txt") != "new\n" || strings.Contains(read(t, ws, "a.txt"), "TWO") {
				t.Errorf("only b.txt should land")
			}
		}},
		{"apply cancelled", []string{"A", "n"}, func(t *testing.T, ws string, st *wtx.Stage, view string) {
			if read(t, ws, "b.txt") != "old\n" || !strings.Contains(view, "cancelled") {
				t.Errorf("a cancelled apply wrote, or did not say so:\n%s", view)
			}
		}},
		{"drop", []string{"D", "y"}, func(t *testing.T, ws string, st *wtx.Stage, view string) {
			s, err := st.Workspace().Stage(context.Background(), st.ID())
			if err != nil || s.State() != wtx.StateDropped {
				t.Errorf("stage not dropped: %v %v", s, err)
			}
			if read(t, ws, "b.txt") != "old\n" {
				t.Errorf("drop wrote the workspace")
			}
		}},
		{"drop needs confirmation", []string{"D", "q"}, func(t *testing.T, ws string, st *wtx.Stage, view string) {
			s, _ := st.Workspace().Stage(context.Background(), st.ID())
			if s.State() != wtx.StateOpen {
				t.Errorf("stage dropped without a yes")
			}
		}},
		{"help", []string{"?"}, func(t *testing.T, ws string, st *wtx.Stage, view string) {
			if !strings.Contains(view, "apply the selection") || !strings.Contains(view, "drop the stage") {
				t.Errorf("help:\n%s", view)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, st := reviewFixture(t)
			m := drive(t, startReview(t, st), tt.keys...)
			tt.check(t, ws, st, screen(m))
		})
	}
}

// The apply is bound to the selection shown: a write into the stage after
// the review loaded makes it refuse, writing nothing.
func TestReviewApplyBoundToDigest(t *testing.T) {
	ws, st := reviewFixture(t)
	m := startReview(t, st)
	if _, err := st.Write(context.Background(), "b.txt", []byte("later\n"), wtx.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	m = drive(t, m, "A", "y")
	if got := read(t, ws, "b.txt"); got != "old\n" {
		t.Fatalf("b.txt = %q after a refused apply", got)
	}
	if v := screen(m); !strings.Contains(v, "apply refused") || !strings.Contains(v, "changed since it was reviewed") {
		t.Errorf("view:\n%s", v)
	}
}

func TestDescribeMarks(t *testing.T) {
	tests := []struct {
		c            wtx.Change
		letter, note string
	}{
		{wtx.Change{Action: "deleted", Before: &wtx.Side{Type: "dir"}}, "D", "deleted dir"},
		{wtx.Change{Action: "modified", Type: "symlink", Before: &wtx.Side{Type: "file", Mode: "0644"}}, "T", "type change: file → symlink"},
		{wtx.Change{Action: "modified", Type: "file", Mode: "0755", Before: &wtx.Side{Type: "file", Mode: "0644"}}, "M", "exec bit 0644 → 0755"},
		{wtx.Change{Action: "modified", Type: "file", Mode: "0600", Before: &wtx.Side{Type: "file", Mode: "0644"}}, "M", "mode 0644 → 0600"},
		{wtx.Change{Action: "modified", Type: "symlink", Target: "b", Before: &wtx.Side{Type: "symlink", Target: "a"}}, "M", "link target a → b"},
		{wtx.Change{Action: "added", Type: "symlink", Target: "x"}, "A", "symlink → x"},
	}
	for _, tt := range tests {
		letter, note, _ := describe(tt.c)
		if letter != tt.letter || note != tt.note {
			t.Errorf("describe(%+v) = %q %q, want %q %q", tt.c, letter, note, tt.letter, tt.note)
		}
	}
}

// On a terminal, diff goes through $PAGER; --no-pager and --json bypass it.
func TestDiffPager(t *testing.T) {
	ws, st := reviewFixture(t)
	state := st.Workspace().StateDir()
	tests := []struct {
		args  []string
		paged bool
	}{
		{[]string{"diff"}, true},
		{[]string{"diff", "--no-pager"}, false},
		{[]string{"--json", "diff"}, false},
	}
	for _, tt := range tests {
		var out, errb strings.Builder
		env := map[string]string{"WTX_STATE_DIR": state, "PAGER": "sed s/^/paged:/", "NO_COLOR": "1", "HOME": t.TempDir()}
		code := Run(context.Background(), append([]string{"-C", ws}, tt.args...),
			Streams{In: strings.NewReader(""), Out: &out, Err: &errb, OutTTY: true}, func(k string) string { return env[k] })
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tt.args, code, errb.String())
		}
		if got := strings.Contains(out.String(), "paged:diff --git"); got != tt.paged {
			t.Errorf("%v: paged = %v, want %v:\n%s", tt.args, got, tt.paged, out.String())
		}
	}
}

// TestI007ReviewQuotesNames: the review's file list shows names as git
// quotes them (no escape sequence or newline of a name reaches the
// screen), and applying the selection writes the exact bytes.
func TestI007ReviewQuotesNames(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	w, err := wtx.Open(ctx, ws, wtx.Options{StateDir: filepath.Join(dir, "state")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	st, err := w.Begin(ctx, wtx.BeginOptions{Backend: "copy"})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"esc\x1b[2Kfake", "new\nline", "bad\xff"}
	for _, n := range names {
		if _, err := st.Write(ctx, n, []byte("x\n"), wtx.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	m := startReview(t, st)
	s := screen(m)
	for _, n := range names {
		if !strings.Contains(s, quote.Path(n)) {
			t.Errorf("the review does not show %q as %s:\n%s", n, quote.Path(n), s)
		}
	}
	if strings.Contains(s, "\x1b") || strings.Contains(s, "\xff") || strings.Contains(s, "new\nline") {
		t.Errorf("a raw name reached the screen:\n%q", s)
	}
	drive(t, m, "A", "y")
	for _, n := range names {
		if got := read(t, ws, n); got != "x\n" {
			t.Errorf("after the review's apply %q holds %q", n, got)
		}
	}
}
