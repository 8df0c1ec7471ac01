package cli_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

var updateScreens = flag.Bool("update", false, "rewrite the golden screens of TestReviewScreens from what the terminal shows")

// TestReviewScreens drives wtx review in a real terminal (tmux) at 80×24
// and 160×45: keys go in through tmux, the screen's text comes out and is
// compared with the golden files in testdata/screens/golden (go test -run
// TestReviewScreens -update rewrites them). The scripts are in
// testdata/screens.
func TestReviewScreens(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed")
	}
	golden, err := filepath.Abs(filepath.Join("testdata", "screens", "golden"))
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "screens"),
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			ws := filepath.Join(env.WorkDir, "ws")
			home := filepath.Join(env.WorkDir, "home")
			for _, d := range []string{ws, home} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					return err
				}
			}
			env.Setenv("WS", ws)
			env.Setenv("WTX_STATE_DIR", filepath.Join(env.WorkDir, ".state"))
			env.Setenv("HOME", home)
			env.Setenv("XDG_STATE_HOME", "")
			env.Setenv("NO_COLOR", "1")
			env.Setenv("TMUX", "")
			env.Setenv("GOLDEN", golden)
			env.Cd = ws
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"term":   cmdTerm,
			"keys":   cmdKeys,
			"screen": cmdScreen,
		},
	})
}

// term W H CMD starts CMD in a detached tmux terminal of W columns and H
// rows (server socket $WORK/tmux.sock, session "review"); the server goes
// when the script ends.
func cmdTerm(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: term W H CMD")
	}
	sock := filepath.Join(ts.Getenv("WORK"), "tmux.sock")
	ts.Check(ts.Exec("tmux", "-S", sock, "new-session", "-d", "-x", args[0], "-y", args[1], "-s", "review", args[2]+"; echo review-exited; sleep 60"))
	ts.Defer(func() { _ = exec.Command("tmux", "-S", sock, "kill-server").Run() }) // the server may be gone already
}

// keys K... sends keys to the terminal, as tmux send-keys names them.
func cmdKeys(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: keys KEY...")
	}
	sock := filepath.Join(ts.Getenv("WORK"), "tmux.sock")
	ts.Check(ts.Exec("tmux", append([]string{"-S", sock, "send-keys", "-t", "review"}, args...)...))
}

// ids are what differs from run to run on a screen: stage and op ids
// (time and random part) and digests. They are replaced by a text of the
// same width, so the layout is what is compared.
var ids = regexp.MustCompile(`(tx|op)-\d{8}T\d{6}Z-[0-9a-f]{8}|sha256:[0-9a-f]+|\d+s ago`)

func normalize(s string) string {
	return ids.ReplaceAllStringFunc(s, func(id string) string {
		switch {
		case strings.HasPrefix(id, "sha256:"):
			return "sha256:" + strings.Repeat("x", len(id)-7)
		case strings.HasSuffix(id, "ago"):
			return strings.Repeat("N", len(id)-5) + "s ago"
		}
		return id[:3] + "YYYYMMDDTHHMMSSZ-xxxxxxxx"
	})
}

// screen NAME WAIT waits until the terminal shows WAIT (a regexp), then
// compares its text with the golden file NAME.txt; the screen may take a
// moment to settle, so a mismatch is retried for a few seconds. With
// -update the golden file is written instead.
func cmdScreen(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: screen NAME WAIT")
	}
	wait := regexp.MustCompile(args[1])
	sock := filepath.Join(ts.Getenv("WORK"), "tmux.sock")
	capture := func() string {
		out, err := exec.Command("tmux", "-S", sock, "capture-pane", "-p", "-t", "review").Output()
		if err != nil {
			ts.Fatalf("capture-pane: %v", err)
		}
		return normalize(string(out))
	}
	file := filepath.Join(ts.Getenv("GOLDEN"), args[0]+".txt")
	var got string
	deadline := time.Now().Add(10 * time.Second)
	for got = capture(); !wait.MatchString(got); got = capture() {
		if time.Now().After(deadline) {
			ts.Fatalf("the screen never showed %q:\n%s", args[1], got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if *updateScreens {
		time.Sleep(300 * time.Millisecond)
		got = capture()
		ts.Check(os.WriteFile(file, []byte(got), 0o644))
		ts.Logf("wrote %s", file)
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		ts.Fatalf("no golden screen (go test -run TestReviewScreens -update writes it): %v", err)
	}
	deadline = time.Now().Add(3 * time.Second)
	for got != string(want) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		got = capture()
	}
	if got != string(want) {
		ts.Fatalf("screen %s differs from %s:\n%s", args[0], file, lineDiff(string(want), got))
	}
	ts.Logf("screen %s:\n%s", args[0], got)
}

// lineDiff shows the rows that differ, numbered.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b bytes.Buffer
	for i := 0; i < max(len(w), len(g)); i++ {
		var a, c string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			c = g[i]
		}
		if a != c {
			fmt.Fprintf(&b, "row %d:\n  want %q\n  got  %q\n", i+1, a, c)
		}
	}
	b.WriteString("whole screen:\n" + got)
	return b.String()
}
