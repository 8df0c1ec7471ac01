//go:build linux

package semantic

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// runWithStdinFile runs wtx (failpoint build) in ws with the file f of
// the workspace as its standard input, opened for reading only, as a
// shell's "< f" does.
func runWithStdinFile(t *testing.T, ws, state, f string, env []string, args ...string) wtxResult {
	t.Helper()
	in, err := os.Open(f)
	mustDo(t, err)
	defer in.Close()
	cmd := exec.Command(wtxtest.Binary(t, true), append([]string{"-C", ws}, args...)...)
	cmd.Env = append(append(os.Environ(), "WTX_STATE_DIR="+state), env...)
	cmd.Stdin = in
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	_ = cmd.Run() // the exit status is judged by the caller
	return wtxResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}

// TestT_002_AttackStdinReopened checks T-002 for /proc paths: a command
// whose standard input is a file of the workspace, given read-only ("wtx
// run -- sort < data.txt"), opens /proc/self/fd/0 again for writing. Its
// input is the view's file, so the write lands in the stage (or nowhere,
// under --read-only) and the real workspace is unchanged, on overlay and
// copy; a standard input the view does not show (an excluded file)
// refuses the run. Before, /proc/self/fd/0 reached the real file on every
// backend, --read-only included. Runs as whoever runs the suite (root,
// and the ordinary user in the unprivileged pass). Negative control
// (failpoint build, WTX_DISABLE=confine-stdio): the write lands in the
// workspace.
func TestT_002_AttackStdinReopened(t *testing.T) {
	t.Parallel()
	cases := []struct {
		backend  string
		readOnly bool
	}{{"overlay", false}, {"copy", false}, {"copy", true}}
	for _, c := range cases {
		for _, control := range []bool{false, true} {
			ws, state := t.TempDir(), t.TempDir()
			data := filepath.Join(ws, "data.txt")
			mustWrite(t, data, "base\n")
			args := []string{"run", "--json", "--backend", c.backend}
			if c.readOnly {
				args = append(args, "--read-only")
			}
			args = append(args, "--", "sh", "-c", "echo pwned > /proc/self/fd/0")
			var env []string
			if control {
				env = []string{"WTX_DISABLE=confine-stdio"}
			}
			res := runWithStdinFile(t, ws, state, data, env, args...)
			got, err := os.ReadFile(data)
			mustDo(t, err)
			landed := string(got) != "base\n"
			name := c.backend
			if c.readOnly {
				name += " --read-only"
			}
			switch {
			case control && !landed:
				t.Errorf("%s: with the descriptor left as given the write did not land: the case cannot fail (%v)", name, res)
			case !control && landed:
				t.Errorf("%s: the command wrote the real workspace through /proc/self/fd/0 (%v)", name, res)
			case !control && !c.readOnly && (res.code != 0 || !strings.Contains(res.stdout, `"data.txt"`)):
				t.Errorf("%s: the write was to land in the stage: %v", name, res)
			}
		}
	}
	stdinThroughAlias(t)
	ws, state := t.TempDir(), t.TempDir()
	secret := filepath.Join(ws, "secret.txt")
	mustWrite(t, secret, "base\n")
	res := runWithStdinFile(t, ws, state, secret, nil, "run", "--backend", "overlay", "--exclude", "secret.txt", "--", "cat")
	if res.code != 125 || strings.Contains(res.stdout, "base") {
		t.Errorf("an excluded file as standard input: want the run refused, got %v", res)
	}
}

// stdinThroughAlias is TestT_002_AttackStdinReopened's case of a standard
// input opened through another mount of the workspace (a bind mount of its
// parent): its path does not name the workspace, its file is the
// workspace's all the same. Root only: an ordinary user's bind mount lives
// in a user namespace of its own, where a run cannot make the namespaces
// that confine it (and says so).
func stdinThroughAlias(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Log("input through another mount of the workspace: not tried, a bind mount needs root here")
		return
	}
	for _, control := range []bool{false, true} {
		base := t.TempDir()
		parent, alias, state := filepath.Join(base, "p"), filepath.Join(base, "alias"), filepath.Join(base, "state")
		ws := filepath.Join(parent, "ws")
		data := filepath.Join(ws, "data.txt")
		mustWrite(t, data, "base\n")
		mustDo(t, os.Mkdir(alias, 0o755))
		mustDo(t, unix.Mount(parent, alias, "", unix.MS_BIND, ""))
		var env []string
		if control {
			env = []string{"WTX_DISABLE=confine-stdio"}
		}
		res := runWithStdinFile(t, ws, state, filepath.Join(alias, "ws", "data.txt"), env,
			"run", "--backend", "copy", "--", "sh", "-c", "echo pwned > /proc/self/fd/0")
		mustDo(t, unix.Unmount(alias, unix.MNT_DETACH))
		got, err := os.ReadFile(data)
		mustDo(t, err)
		landed := string(got) != "base\n"
		switch {
		case control && !landed:
			t.Errorf("input through another mount: with the descriptor left as given the write did not land: the case cannot fail (%v)", res)
		case !control && landed:
			t.Errorf("input through another mount: the command wrote the real workspace through /proc/self/fd/0 (%v)", res)
		}
	}
}
