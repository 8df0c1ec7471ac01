package semantic

import (
	"os"
	"os/exec"
	"path/filepath"
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
