//go:build linux

package semantic

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// notMemberRig is a workspace of an ordinary user holding a file the user owns
// in a group the user is not in (root's, as "chown user file" leaves it),
// with wtx run as that user.
type notMemberRig struct {
	base, state, wtx string
	uid, gid         int
	prefix           []string
}

func newNotMemberRig(t *testing.T, failpoints bool) *notMemberRig {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the file is given to a user in a group the user is not in by chown")
	}
	p, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("needs setpriv to run wtx as an ordinary user")
	}
	r := &notMemberRig{uid: 65534, gid: 65534}
	if u, err := user.Lookup("wtxci"); err == nil {
		r.uid, _ = strconv.Atoi(u.Uid)
		r.gid, _ = strconv.Atoi(u.Gid)
	}
	r.base, err = os.MkdirTemp("", "wtx-owner-")
	mustDo(t, err)
	t.Cleanup(func() { os.RemoveAll(r.base) })
	mustDo(t, os.Chmod(r.base, 0o755))
	r.state = filepath.Join(r.base, "state")
	mustDo(t, os.Mkdir(r.state, 0o700))
	mustDo(t, os.Lchown(r.state, r.uid, r.gid))
	r.wtx = filepath.Join(r.base, "wtx")
	copyExec(t, wtxtest.Binary(t, failpoints), r.wtx)
	r.prefix = []string{p, "--reuid=" + strconv.Itoa(r.uid), "--regid=" + strconv.Itoa(r.gid), "--clear-groups"}
	return r
}

// workspace makes workspace name holding files (path → content), every
// entry the user's, then gives the entries in root to root (uid and gid
// 0 for a path ending in "/", gid 0 alone otherwise).
func (r *notMemberRig) workspace(t *testing.T, name string, files map[string]string, root []string) string {
	t.Helper()
	ws := filepath.Join(r.base, name)
	for p, c := range files {
		mustWrite(t, filepath.Join(ws, p), c)
	}
	mustDo(t, filepath.Walk(ws, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, r.uid, r.gid)
	}))
	for _, p := range root {
		if strings.HasSuffix(p, "/") {
			mustDo(t, os.Lchown(filepath.Join(ws, p), 0, 0))
		} else {
			mustDo(t, os.Lchown(filepath.Join(ws, p), -1, 0))
		}
	}
	return ws
}

func (r *notMemberRig) run(t *testing.T, ws string, env []string, args ...string) wtxResult {
	t.Helper()
	argv := append(append([]string(nil), r.prefix...), r.wtx, "-C", ws)
	cmd := exec.Command(argv[0], append(argv[1:], args...)...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + r.base, "WTX_STATE_DIR=" + r.state}, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("wtx %v: %v", args, err)
	}
	return wtxResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}

// TestS_STAGE_004_OwnerNotMember checks the promise for a file the caller
// owns whose group it is not in (after root's "chown user file"), run
// without root: "auto" does not take the overlay, whose user namespace
// cannot keep that group on a changed copy, and says so naming the file;
// the command changes the file as it would run directly, and the apply
// lands it. An explicit overlay refuses, naming the file, and refuses a
// root-owned directory holding a file the user may change as well, but
// still stages a root-owned tree the user cannot change. Never a bare
// EOVERFLOW. Negative control (failpoint build,
// WTX_DISABLE=overlay-groups): "auto" takes the overlay and the command
// meets EOVERFLOW.
func TestS_STAGE_004_OwnerNotMember(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		name := "protected"
		if control {
			name = "negative-control"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := newNotMemberRig(t, control)
			probe := r.workspace(t, "probe", map[string]string{"p": "p\n"}, nil)
			if res := r.run(t, probe, nil, "run", "--backend", "overlay", "--", "true"); res.code != 0 {
				t.Skipf("the overlay backend cannot stage here: %s", res.stderr)
			}
			ws := r.workspace(t, "ws", map[string]string{"f": "a\n", "sub/g": "g\n"}, []string{"f"})
			var env []string
			if control {
				env = []string{"WTX_DISABLE=overlay-groups"}
			}
			res := r.run(t, ws, env, "run", "--apply-on-success", "--", "sh", "-c", "echo more >> f && echo n > sub/new")
			bare := strings.Contains(res.stderr, "Value too large")
			if control {
				if !bare {
					t.Fatalf("with the check off, the overlay should meet EOVERFLOW: the test cannot tell (exit %d):\n%s", res.code, res.stderr)
				}
				return
			}
			if bare || res.code != 0 {
				t.Fatalf("the command failed in the stage (exit %d):\n%s", res.code, res.stderr)
			}
			if !strings.Contains(res.stderr, "not using the overlay backend: the workspace holds f, owned by you and group root") {
				t.Errorf("auto did not say why it left the overlay out, naming f:\n%s", res.stderr)
			}
			if got, _ := os.ReadFile(filepath.Join(ws, "f")); string(got) != "a\nmore\n" {
				t.Errorf("after apply f = %q", got)
			}
			r.explicitOverlay(t)
		})
	}
}

// explicitOverlay checks the explicit overlay's answers.
func (r *notMemberRig) explicitOverlay(t *testing.T) {
	t.Helper()
	for _, c := range []struct {
		name  string
		files map[string]string
		root  []string
		want  string // "" when the overlay stages it
	}{
		{"owner-not-member", map[string]string{"f": "a\n"}, []string{"f"}, "f"},
		{"root-directory-over-a-user-file", map[string]string{"rdir/mine": "m\n"}, []string{"rdir/"}, "rdir"},
		{"root-tree-user-cannot-change", map[string]string{"ro/file": "r\n", "mine": "m\n"}, []string{"ro/", "ro/file/"}, ""},
	} {
		ws := r.workspace(t, "ws-"+c.name, c.files, c.root)
		res := r.run(t, ws, nil, "--json", "run", "--backend", "overlay", "--", "sh", "-c", "cat */* >/dev/null && echo x >> mine 2>/dev/null; true")
		switch {
		case strings.Contains(res.stdout+res.stderr, "Value too large"):
			t.Errorf("%s: bare EOVERFLOW:\n%s%s", c.name, res.stdout, res.stderr)
		case c.want == "" && res.code != 0:
			t.Errorf("%s: the overlay refused a tree the user cannot change: %s", c.name, res.stdout)
		case c.want != "" && (errorCode(t, res) != "precondition.unsupported" || !strings.Contains(res.stdout, "the workspace holds "+c.want+",")):
			t.Errorf("%s: want a refusal naming %s, got exit %d: %s", c.name, c.want, res.code, res.stdout)
		}
	}
}
