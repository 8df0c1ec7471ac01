package semantic

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// T-003, tried from outside with cases the gate's own tests do not hold:
// other ways an agent on a default server reaches what only a person may
// write. Each runs again in a failpoint build with the protection off,
// where the attack must land.

// t3NestedProject: the project file protects sub/conf. An agent on a
// default server plants sub/.wtx.toml, which would make sub a workspace of
// its own for every command started there; a person standing in sub then
// runs a command that writes conf/k and applies it without --approve. It
// returns the planting's answer, the person's apply's exit status and what
// sub/conf/k holds.
func t3NestedProject(t *testing.T, off bool) (toolResult, int, string) {
	e := newT3(t, map[string]string{".wtx.toml": "protect = [\"sub/conf\"]\n", "sub/conf/k": "k\n", "sub/a": "a\n"})
	bin, env := wtxtest.Binary(t, false), []string{"WTX_STATE_DIR=" + e.state}
	if off {
		bin, env = wtxtest.Binary(t, true), append(env, "WTX_DISABLE=project-protect")
	}
	s := startMCP(t, bin, e.ws, e.state, env[1:])
	tx := s.beginStage(map[string]any{})
	s.call("write", map[string]any{"tx": tx, "path": "sub/.wtx.toml", "content": ""})
	planted := s.call("apply", map[string]any{"tx": tx})
	// The person, in sub, without -C: the workspace is found from there.
	person := func(args ...string) int {
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Env = filepath.Join(e.ws, "sub"), append(os.Environ(), env...)
		_ = cmd.Run() // the exit status is what counts
		return cmd.ProcessState.ExitCode()
	}
	person("run", "--keep", "--backend", "copy", "--name", "p", "--", "sh", "-c", "echo person > conf/k")
	code := person("apply", "p")
	return planted, code, e.read("sub/conf/k")
}

func TestT_003_AttackNestedProjectFile(t *testing.T) {
	t.Parallel()
	r, code, got := t3NestedProject(t, false)
	if r.errorCode() != "refusal.protected" || code != 2 || got != "k\n" {
		t.Fatalf("an agent planting sub/.wtx.toml: %s; the person's apply from sub exits %d and sub/conf/k holds %q, want refusal.protected, 2 and k", r.text(), code, got)
	}
	// Negative control: with the project file unprotected the planted file
	// lands, and what the file above protects is written unasked from sub.
	if r, code, got = t3NestedProject(t, true); r.IsError || code != 0 || got != "person\n" {
		t.Fatalf("control: with project-protect off the plant should land and sub/conf/k be written unasked (exit %d, holds %q): %s", code, got, r.text())
	}
}

// t3ProtectLater: an agent's stage writes conf/k, and a person's op wrote
// conf/k; then the person protects conf in the project file (approved).
// The agent, on a default server, applies its stage, opened before the
// protect, and undoes the person's op, made before it. It returns what
// each call answered and what conf/k holds after each.
func t3ProtectLater(t *testing.T, off bool) (apply, undo toolResult, afterApply, afterUndo string) {
	e := newT3(t, map[string]string{"conf/k": "k\n", "conf/j": "j\n"})
	op := e.personApply(nil, "echo j2 > conf/j")
	s := e.agent(false)
	if off {
		s = startMCP(t, wtxtest.Binary(t, true), e.ws, e.state, []string{"WTX_DISABLE=live-protect"})
	}
	tx := s.beginStage(map[string]any{})
	s.call("write", map[string]any{"tx": tx, "path": "conf/k", "content": "agent\n"})
	e.personApply(nil, `echo 'protect = ["conf"]' > .wtx.toml`)
	apply = s.call("apply", map[string]any{"tx": tx})
	afterApply = e.read("conf/k")
	undo = s.call("undo", map[string]any{"op": op})
	return apply, undo, afterApply, e.read("conf/j")
}

func TestT_003_AttackProtectAddedLater(t *testing.T) {
	t.Parallel()
	apply, undo, k, j := t3ProtectLater(t, false)
	if apply.errorCode() != "refusal.protected" || k != "k\n" {
		t.Errorf("an agent's apply of a stage opened before the project file protected conf: %s; conf/k holds %q", apply.text(), k)
	}
	if undo.errorCode() != "refusal.protected" || j != "j2\n" {
		t.Errorf("an agent's undo of an op made before the project file protected conf: %s; conf/j holds %q", undo.text(), j)
	}
	// Negative control: judged by what the stage opened with, both land.
	if apply, undo, k, j = t3ProtectLater(t, true); apply.IsError || undo.IsError || k != "agent\n" || j != "j\n" {
		t.Fatalf("control: with live-protect off both should land (conf/k %q, conf/j %q): %s %s", k, j, apply.text(), undo.text())
	}
}

// t3ForkLine: a fork of a flow stops for review after its first forked
// step; an agent on a default server writes a git hook into the stage that
// keeps the fork's line; a person resumes, and the next step, which
// approves its own protected write, runs from that line. It returns what
// the hook holds.
func t3ForkLine(t *testing.T, e *flowEnv) string {
	mustWrite(t, filepath.Join(e.ws, ".git", "hooks", "pre-commit"), t3HookOld)
	mustWrite(t, filepath.Join(e.ws, "a.txt"), "a\n")
	f := e.file("fl.toml", `version = 1
[[steps]]
name = "s1"
kind = "run"
command = ["sh", "-c", "echo 1 >> a.txt"]
[[steps]]
name = "s2"
kind = "run"
command = ["sh", "-c", "echo 2 >> a.txt"]
on_success = "review"
[[steps]]
name = "s3"
kind = "run"
command = ["sh", "-c", "echo 3 > .git/description"]
approve = true
`)
	e.run(nil, "flow", "run", f, "--name", "orig")
	e.run(nil, "flow", "resume", "orig")
	out, _ := e.flowJSON(nil, "flow", "fork", "orig", "--at", "s1", "--name", "fk")
	if out.Run.Status != "review" {
		t.Fatalf("the fork should stop for review at s2: %+v", out.Run)
	}
	s := startMCP(t, e.bin, e.ws, e.state, nil)
	var l struct {
		Stages []struct{ Tx, Name, State string }
	}
	s.call("list", map[string]any{}).decode(t, &l)
	line := ""
	for _, st := range l.Stages {
		if strings.Contains(st.Name, ".after") && st.State == "open" {
			line = st.Tx
		}
	}
	if w := s.call("write", map[string]any{"tx": line, "path": ".git/hooks/pre-commit", "content": t3HookNew}); line == "" || w.IsError {
		t.Fatalf("the agent's write into the fork's line %q: %s", line, w.text())
	}
	e.run(nil, "flow", "resume", "fk")
	data, _ := os.ReadFile(filepath.Join(e.ws, ".git", "hooks", "pre-commit"))
	return string(data)
}

func TestT_003_AttackAgentWriteInForkLine(t *testing.T) {
	t.Parallel()
	if hook := t3ForkLine(t, newFlowEnv(t, false)); hook != t3HookOld {
		t.Fatalf("an agent's write into a fork's line landed with the next step: the hook holds %q", hook)
	}
	// Negative control: the line is carried as it is, the agent's hook
	// with it, under the step's approval.
	if hook := t3ForkLine(t, newFlowEnv(t, true, "WTX_DISABLE=flow-lineage-own")); hook != t3HookNew {
		t.Fatalf("control: with flow-lineage-own off the hook should land, holds %q", hook)
	}
}
