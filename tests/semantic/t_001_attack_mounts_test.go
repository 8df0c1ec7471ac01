//go:build linux

package semantic

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// apartCase puts the state root and the workspace where one lies within
// the other on their filesystem, though neither path is beneath the other:
// a bind mount joins them.
type apartCase struct {
	name string
	// layout returns, under root, the directory to bind (src), where
	// (at), the workspace and the state root; src and at exist.
	layout func(t *testing.T, root string) (src, at, ws, state string)
	// harm says what wtx did when it was let through, or "".
	harm func(t *testing.T, res wtxResult, ws, state, src string) string
}

var apartCases = []apartCase{
	{name: "state-root-is-a-directory-of-the-workspace", layout: func(t *testing.T, root string) (string, string, string, string) {
		ws, st := filepath.Join(root, "ws"), filepath.Join(root, "state")
		mustWrite(t, filepath.Join(ws, "a.txt"), "a\n")
		mustDo(t, os.Mkdir(filepath.Join(ws, ".st"), 0o755))
		mustDo(t, os.Mkdir(st, 0o755))
		return filepath.Join(ws, ".st"), st, ws, st
	}, harm: func(t *testing.T, _ wtxResult, ws, _, _ string) string {
		names, err := os.ReadDir(filepath.Join(ws, ".st"))
		mustDo(t, err)
		if len(names) > 0 {
			return "wtx wrote its state into the workspace: " + names[0].Name()
		}
		return ""
	}},
	{name: "workspace-is-a-directory-of-the-state-root", layout: func(t *testing.T, root string) (string, string, string, string) {
		ws, st := filepath.Join(root, "ws"), filepath.Join(root, "state")
		mustWrite(t, filepath.Join(st, "inner", "a.txt"), "a\n")
		mustDo(t, os.Mkdir(ws, 0o755))
		return filepath.Join(st, "inner"), ws, ws, st
	}, harm: func(_ *testing.T, res wtxResult, _, _, _ string) string {
		if res.code == 0 {
			return "a workspace inside the state root was opened"
		}
		return ""
	}},
}

// TestT_001_AttackStateRootJoinedByMount checks T-001's ground: the
// workspace and the state root are apart. A state root that is a bind
// mount of a directory in the workspace (or a workspace that is one of a
// directory in the state root) lies within the other on their filesystem
// though not by path; wtx refuses it as precondition.state-in-workspace
// and writes nothing, as it does when one path is beneath the other.
// Before, the checks by path and by the directories above the state root
// missed it: wtx wrote its database, keys and stages into the workspace,
// and a copy stage copied the state root into its own view until the
// names grew too long. Root and an ordinary user alike (the bind is made
// in a user namespace). Negative control (failpoint build,
// WTX_DISABLE=state-apart-mounts): each case does its harm.
func TestT_001_AttackStateRootJoinedByMount(t *testing.T) {
	t.Parallel()
	for _, c := range apartCases {
		for _, control := range []bool{false, true} {
			root := t.TempDir()
			src, at, ws, state := c.layout(t, root)
			argv := append(bindAt(t, src, at), wtxtest.Binary(t, true), "--json", "-C", ws, "list")
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = append(os.Environ(), "WTX_STATE_DIR="+state)
			if control {
				cmd.Env = append(cmd.Env, "WTX_DISABLE=state-apart-mounts")
			}
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			_ = cmd.Run() // the exit status is judged below
			res := wtxResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
			harm := c.harm(t, res, ws, state, src)
			switch {
			case control && harm == "":
				t.Errorf("%s: with the check switched off, no harm was done: the case cannot fail (%v)", c.name, res)
			case control:
			case harm != "":
				t.Errorf("%s: %s (%v)", c.name, harm, res)
			case res.code != 1 || !strings.Contains(res.stdout, `"precondition.state-in-workspace"`):
				t.Errorf("%s: want precondition.state-in-workspace, got %v", c.name, res)
			}
		}
	}
}
