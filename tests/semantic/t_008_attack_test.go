package semantic

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// T-008, tried from outside: a person's review under way while a flow
// action would drop the stage.

// t8ReviewRace: a person runs a command in a stage kept for review, which
// writes their own file once told to; meanwhile the run is abandoned (or
// the step skipped). It returns the action's exit status and the stage's
// state and paths once the person's command has ended.
func t8ReviewRace(t *testing.T, e *flowEnv, name string, action ...string) (int, string, []string) {
	// The step's stage, as the step left it: the person's review is the
	// command below.
	if err := os.WriteFile(filepath.Join(e.ws, "a.txt"), []byte("a\n\n\n\n\nz\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, r := e.flowJSON(nil, "flow", "run", e.file(name+".toml", reviewFlow), "--name", name)
	if out.Run.Status != "review" || r.code != 0 {
		t.Fatalf("flow run: %s (exit %d)\n%s", out.Run.Status, r.code, r.stderr)
	}
	tx := out.Run.Steps[0].Attempts[0].Result.StageID
	goFile := filepath.Join(e.outside, name+".go")
	c := e.cmd(nil, "run", "--tx", tx, "--", "sh", "-c", "while [ ! -e '"+goFile+"' ]; do sleep 0.05; done; echo late > late.txt")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if r := e.run(nil, "--json", "status", tx); strings.Contains(r.stdout, `"running":true`) {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the person's run never held the stage: %s", r.stdout)
		}
	}
	a := e.cmd(nil, action...)
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	// Long enough for the action to check the stage and wait on it.
	time.Sleep(1500 * time.Millisecond)
	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_ = c.Wait() // its exit status does not matter: the stage does
	_ = a.Wait() // the exit status is in ProcessState
	state, paths := stageHolds(t, e, tx)
	return a.ProcessState.ExitCode(), state, paths
}

func TestT_008_AttackDropWhileReviewRuns(t *testing.T) {
	t.Parallel()
	e := newFlowEnv(t, false)
	for _, action := range [][]string{{"flow", "abandon", "ab"}, {"flow", "resume", "sk", "--skip"}} {
		code, state, paths := t8ReviewRace(t, e, action[2], action...)
		if code != 2 || state != "open" || !slices.Contains(paths, "late.txt") {
			t.Errorf("%v while a person's command ran in the reviewed stage: exit %d, the stage %s holding %v; want exit 2 and the stage open with late.txt", action, code, state, paths)
		}
	}
	// Negative control: checked before the command wrote, dropped after.
	e = newFlowEnv(t, true, "WTX_DISABLE=flow-review-race")
	if code, state, _ := t8ReviewRace(t, e, "nc", "flow", "abandon", "nc"); code != 0 || state != "dropped" {
		t.Fatalf("control: with flow-review-race off abandon should wait and drop the person's file: exit %d, stage %s", code, state)
	}
}

// t8AgentInReview: a flow step that approves its protected paths (it
// writes .git/description) stops for review; an agent on a default server
// writes a git hook into the stage under review; a person resumes. It
// returns the resume's exit status and what the hook holds.
func t8AgentInReview(t *testing.T, e *flowEnv) (int, string) {
	mustWrite(t, filepath.Join(e.ws, ".git", "hooks", "pre-commit"), t3HookOld)
	f := e.file("ap.toml", `version = 1
[[steps]]
name = "gen"
kind = "run"
command = ["sh", "-c", "echo b > a.txt; echo described > .git/description"]
approve = true
on_success = "review"
`)
	out, r := e.flowJSON(nil, "flow", "run", f, "--name", "ap")
	if out.Run.Status != "review" || r.code != 0 {
		t.Fatalf("flow run: %s (exit %d)\n%s", out.Run.Status, r.code, r.stderr)
	}
	tx := out.Run.Steps[0].Attempts[0].Result.StageID
	s := startMCP(t, e.bin, e.ws, e.state, nil)
	if w := s.call("write", map[string]any{"tx": tx, "path": ".git/hooks/pre-commit", "content": t3HookNew}); w.IsError {
		t.Fatalf("the agent's write into the review stage: %s", w.text())
	}
	_, r = e.flowJSON(nil, "flow", "resume", "ap")
	data, _ := os.ReadFile(filepath.Join(e.ws, ".git", "hooks", "pre-commit"))
	return r.code, string(data)
}

func TestT_008_AttackAgentEditInApprovedReview(t *testing.T) {
	t.Parallel()
	e := newFlowEnv(t, false)
	if code, hook := t8AgentInReview(t, e); code != 1 || hook != t3HookOld {
		t.Fatalf("a resume of an approving step's review stage an agent wrote a hook into: exit %d, hook %q; want exit 1 (refused) and the hook as it was", code, hook)
	}
	if _, err := os.Stat(filepath.Join(e.ws, ".git", "description")); err == nil {
		t.Error("the refused resume applied the step's own change")
	}
	// Negative control: the flow file's approval covers what the agent
	// added, and the hook lands.
	e = newFlowEnv(t, true, "WTX_DISABLE=flow-review-approve")
	if code, hook := t8AgentInReview(t, e); code != 0 || hook != t3HookNew {
		t.Fatalf("control: with flow-review-approve off the hook should land: exit %d, hook %q", code, hook)
	}
}

// TestT_008_AttackKilledResumeKeepsEdits: a resume that applies a stage
// kept for review, holding the reviewer's own file, is killed at points of
// its apply and of the step's record; the next resume ends the run done
// with the reviewer's file in the workspace, never dropped or lost.
func TestT_008_AttackKilledResumeKeepsEdits(t *testing.T) {
	t.Parallel()
	for _, point := range []string{"apply:journaled", "apply:committed", "flow:applied"} {
		e := newFlowEnv(t, true)
		reviewed(t, e, "k")
		if r := e.run([]string{"WTX_FAILPOINT=" + point}, "flow", "resume", "k"); r.code != 137 && r.code != -1 {
			t.Fatalf("%s: the resume was not killed: exit %d %s", point, r.code, r.stderr)
		}
		out, r := e.flowJSON(nil, "flow", "resume", "k")
		mine, err := os.ReadFile(filepath.Join(e.ws, "mine.txt"))
		if out.Run.Status != "done" || r.code != 0 || err != nil || string(mine) != "the reviewer's own\n" {
			t.Errorf("killed at %s, the next resume: %s (exit %d), mine.txt %q (%v); want done with the reviewer's file", point, out.Run.Status, r.code, mine, err)
		}
	}
}

// t8Interrupted: a run step is killed after its command ran, before its
// apply; a person writes their own file into the stage it left; a resume
// follows. It returns the resume's exit status and the stage's state and
// paths after it.
func t8Interrupted(t *testing.T, e *flowEnv) (int, string, []string) {
	f := e.file("int.toml", "version = 1\n[[steps]]\nname = \"gen\"\nkind = \"run\"\ncommand = [\"sh\", \"-c\", \"echo out > out.txt\"]\nidempotent = true\n")
	if r := e.run([]string{"WTX_FAILPOINT=flow:staged"}, "flow", "run", f, "--name", "int"); r.code != -1 && r.code != 137 {
		t.Fatalf("the run was not killed: exit %d %s", r.code, r.stderr)
	}
	show, _ := e.flowJSON(nil, "flow", "show", "int")
	a := show.Run.Steps[0].Attempts
	if len(a) != 1 || a[0].Result == nil || a[0].Result.StageID == "" {
		t.Fatalf("the killed attempt names no stage: %+v", show.Run)
	}
	tx := a[0].Result.StageID
	c := e.cmd(nil, "write", "--tx", tx, "mine.txt")
	c.Stdin = strings.NewReader("mine\n")
	if msg, err := c.CombinedOutput(); err != nil {
		t.Fatalf("the person's write: %v\n%s", err, msg)
	}
	r := e.run(nil, "flow", "resume", "int")
	state, paths := stageHolds(t, e, tx)
	return r.code, state, paths
}

func TestT_008_AttackResumeKeepsEditsOfInterruptedStep(t *testing.T) {
	t.Parallel()
	if code, state, paths := t8Interrupted(t, newFlowEnv(t, true)); code != 2 || state != "open" || !slices.Contains(paths, "mine.txt") {
		t.Fatalf("a resume over an interrupted step's stage holding a person's file: exit %d, the stage %s holding %v; want exit 2 and the stage open with mine.txt", code, state, paths)
	}
	// Negative control: the resume drops the stage, the person's file with
	// it, and runs the step again.
	if code, state, _ := t8Interrupted(t, newFlowEnv(t, true, "WTX_DISABLE=flow-keep-edited")); code != 0 || state != "dropped" {
		t.Fatalf("control: with flow-keep-edited off the resume should drop the stage: exit %d, stage %s", code, state)
	}
}
