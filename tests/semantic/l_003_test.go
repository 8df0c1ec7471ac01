package semantic

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestL003_InsideStage checks L-003: a wtx command run inside a stage's
// view never settles, drops or rewrites the stage it runs in, nor acts on
// the view as if it were the workspace: it is refused as
// precondition.inside-stage (exit 1), also when the command unset WTX_TX
// and WTX_WORKSPACE (a view, copy or overlay, is found by its mount over
// the workspace's path), and when it then leaves the view and names the workspace
// with -C (found by the stage's supervising process, or the mount). No staged write is lost: after the run, the stage is open
// with every write, and applying it from outside lands them.
func TestL003_InsideStage(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skipf("no sh in PATH: %v", err)
	}
	for _, backend := range []string{"copy", "overlay"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newBoundaryEnv(t, backend, false)
			e.must("begin", "--backend", backend, "--name", "k")
			e.must("begin", "--backend", backend, "--name", "other")
			inStage := map[string]string{
				"apply":         "apply",
				"apply-k":       "apply k",
				"drop-k":        "drop k",
				"write-k":       "write w.txt --tx k </dev/null",
				"apply-other":   "apply other",
				"list":          "list",
				"run":           "run -- true",
				"noenv-apply":   "apply k",
				"noenv-drop":    "drop k",
				"noenv-run":     "run -- true",
				"noenv-other":   "apply other",
				"shell-apply":   "apply k",
				"shell-noenv":   "drop k",
				"run-new-apply": "apply",
				"away-apply":    `-C "$REALWS" apply k`,
				"away-drop":     `-C "$REALWS" drop k`,
			}
			script := `echo staged >f.txt; ` +
				inner("apply", inStage["apply"]) + inner("apply-k", inStage["apply-k"]) + inner("drop-k", inStage["drop-k"]) +
				inner("write-k", inStage["write-k"]) + inner("apply-other", inStage["apply-other"]) + inner("list", inStage["list"]) +
				inner("run", inStage["run"]) +
				`unset WTX_TX WTX_WORKSPACE; ` +
				inner("noenv-apply", inStage["noenv-apply"]) + inner("noenv-drop", inStage["noenv-drop"]) +
				inner("noenv-run", inStage["noenv-run"]) + inner("noenv-other", inStage["noenv-other"]) +
				`cd /; ` + inner("away-apply", inStage["away-apply"]) + inner("away-drop", inStage["away-drop"])
			e.env = append(e.env, "REALWS="+e.ws)
			e.must("run", "--tx", "k", "--", "sh", "-c", script)

			// wtx shell, the same way in.
			cmd := exec.Command(e.bin, "-C", e.ws, "shell", "k")
			cmd.Env = append(append(os.Environ(), "WTX_STATE_DIR="+e.st, "SHELL=/bin/sh"), e.env...)
			cmd.Stdin = strings.NewReader("echo shell >g.txt\n" + inner("shell-apply", inStage["shell-apply"]) +
				"unset WTX_TX WTX_WORKSPACE\n" + inner("shell-noenv", inStage["shell-noenv"]) + "\n")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("wtx shell k: %v\n%s", err, out)
			}

			// A new stage (wtx run without --tx), wtx apply inside it.
			var run struct {
				Tx string `json:"tx"`
			}
			e.runJSON(&run, "run", "--backend", backend, "--", "sh", "-c", "echo new >n.txt; "+inner("run-new-apply", inStage["run-new-apply"]))

			for name := range inStage {
				code, rc := e.answer(name)
				want := "1"
				if strings.HasPrefix(inStage[name], "run ") {
					want = "125" // wtx run exits 125 when wtx itself fails
				}
				if code != "precondition.inside-stage" || rc != want {
					t.Errorf("wtx %s inside the stage: exit %s, code %q; want exit %s, precondition.inside-stage", inStage[name], rc, code, want)
				}
			}
			for _, st := range []string{"k", "other", run.Tx} {
				if got := e.stageState(st); got != "open" {
					t.Errorf("stage %s is %s after wtx ran inside a stage, want open", st, got)
				}
			}
			if got, want := e.changedPaths("k"), []string{"f.txt", "g.txt"}; !slices.Equal(got, want) {
				t.Errorf("stage k holds %v, want %v: a staged write was lost", got, want)
			}
			if got := e.changedPaths("other"); len(got) != 0 {
				t.Errorf("stage other holds %v, want nothing (nothing applied into it from inside)", got)
			}
			for _, p := range []string{"f.txt", "g.txt", "n.txt"} {
				if exists(filepath.Join(e.ws, p)) {
					t.Errorf("%s reached the workspace before any apply from outside", p)
				}
			}
			e.must("apply", "k")
			e.must("apply", run.Tx)
			if readWS(t, e.ws, "f.txt") != "staged\n" || readWS(t, e.ws, "g.txt") != "shell\n" || readWS(t, e.ws, "n.txt") != "new\n" {
				t.Errorf("applying from outside did not land the staged writes")
			}
		})
	}
}

// TestL003_NegativeControl switches the inside-stage check off (the
// failpoint build, WTX_DISABLE=inside-stage, with the read-only state root
// off too, and the mount check that keeps the state root apart from the
// workspace) and shows what it prevents: on every backend (the view is at
// the workspace's own path, T-002), wtx apply of another stage from inside
// a view applies into the view, settles that stage, and its write never
// reaches the workspace.
func TestL003_NegativeControl(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skipf("no sh in PATH: %v", err)
	}
	for _, backend := range []string{"copy", "overlay"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newBoundaryEnv(t, backend, true)
			// The state root is read-only inside a view (L-006), which
			// alone stops this apply: it is left writable here, to show
			// what the inside-stage check stops by itself.
			e.env = append(e.env, "WTX_DISABLE=inside-stage,confine-state,state-apart-mounts")
			e.must("begin", "--backend", backend, "--name", "a")
			cmd := exec.Command(e.bin, "-C", e.ws, "write", "f.txt", "--tx", "a")
			cmd.Env = append(append(os.Environ(), "WTX_STATE_DIR="+e.st), e.env...)
			cmd.Stdin = strings.NewReader("staged\n")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("wtx write: %v\n%s", err, out)
			}
			e.must("run", "--backend", backend, "--", "sh", "-c", "unset WTX_TX WTX_WORKSPACE; "+inner("apply-a", "apply a"))
			code, _ := e.answer("apply-a")
			if code != "" || e.stageState("a") != "applied" || exists(filepath.Join(e.ws, "f.txt")) {
				t.Fatalf("with the check off, wtx apply inside a view should settle stage a without writing the workspace (code %q, state %s)", code, e.stageState("a"))
			}
		})
	}
}
