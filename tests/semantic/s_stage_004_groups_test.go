//go:build linux

package semantic

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// groupRig is a workspace holding a set-group-id directory of a
// supplementary group of the identity that runs wtx.
type groupRig struct {
	base, ws, state, wtx string
	prefix               []string
	gid                  int
}

// newGroupRig sets the rig up: as root, for an ordinary user (65534) given
// the extra group 4242 by setpriv; otherwise for the test's own user and
// one of its supplementary groups, or it skips.
func newGroupRig(t *testing.T, failpoints bool) *groupRig {
	t.Helper()
	base, err := os.MkdirTemp("", "wtx-groups-")
	mustDo(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	mustDo(t, os.Chmod(base, 0o755))
	r := &groupRig{base: base, ws: filepath.Join(base, "ws"), state: filepath.Join(base, "state")}
	uid := os.Geteuid()
	if uid == 0 {
		p, err := exec.LookPath("setpriv")
		if err != nil {
			t.Skip("needs setpriv to run wtx as an ordinary user with a supplementary group")
		}
		uid, r.gid = 65534, 4242
		r.prefix = []string{p, "--reuid=65534", "--regid=65534", "--groups=4242"}
	} else {
		groups, err := os.Getgroups()
		mustDo(t, err)
		for _, g := range groups {
			if g != os.Getegid() {
				r.gid = g
				break
			}
		}
		if r.gid == 0 {
			t.Skip("the test's user has no supplementary group to try")
		}
	}
	for _, d := range []string{r.ws, r.state, filepath.Join(r.ws, "proj")} {
		mustDo(t, os.Mkdir(d, 0o755))
	}
	mustDo(t, os.WriteFile(filepath.Join(r.ws, "proj", "notes"), []byte("shared\n"), 0o664))
	for _, p := range []string{r.ws, r.state, filepath.Join(r.ws, "proj"), filepath.Join(r.ws, "proj", "notes")} {
		mustDo(t, os.Lchown(p, uid, -1))
	}
	for _, p := range []string{filepath.Join(r.ws, "proj"), filepath.Join(r.ws, "proj", "notes")} {
		mustDo(t, os.Lchown(p, -1, r.gid))
	}
	mustDo(t, os.Chmod(filepath.Join(r.ws, "proj"), os.ModeSetgid|0o775))
	r.wtx = filepath.Join(base, "wtx")
	copyExec(t, wtxtest.Binary(t, failpoints), r.wtx)
	return r
}

func (r *groupRig) run(t *testing.T, env []string, args ...string) wtxResult {
	t.Helper()
	argv := append(append([]string(nil), r.prefix...), r.wtx, "-C", r.ws)
	cmd := exec.Command(argv[0], append(argv[1:], args...)...)
	cmd.Env = append(append(os.Environ(), "WTX_STATE_DIR="+r.state, "HOME="+r.base), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("wtx %v: %v", args, err)
	}
	return wtxResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}

const groupScript = `touch proj/new && echo more >> proj/notes && mkdir proj/sub && stat -c 'gid=%g' proj/new`

// TestS_STAGE_004_SupplementaryGroups checks that a command run without
// root in a stage creates and changes files of the caller's supplementary
// group in a set-group-id directory as it would run directly: either the
// overlay maps the group (newgidmap and /etc/subgid), or "auto" takes
// another backend and says why; after apply, the new file belongs to the
// directory's group. Never a bare EOVERFLOW. An explicit overlay backend
// that cannot map the group refuses, naming it.
func TestS_STAGE_004_SupplementaryGroups(t *testing.T) {
	t.Parallel()
	r := newGroupRig(t, false)
	res := r.run(t, nil, "run", "--apply-on-success", "--", "sh", "-c", groupScript)
	if strings.Contains(res.stderr, "Value too large") {
		t.Fatalf("bare EOVERFLOW:\n%s", res.stderr)
	}
	if res.code != 0 {
		t.Fatalf("the command failed in the stage (%d):\n%s", res.code, res.stderr)
	}
	overlay := strings.Contains(res.stderr, "(overlay)")
	if !overlay && !strings.Contains(res.stderr, "not using the overlay backend: the workspace holds files of your supplementary group") {
		t.Errorf("overlay was not used and wtx did not say why:\n%s", res.stderr)
	}
	if overlay && !strings.Contains(res.stdout, "gid="+strconv.Itoa(r.gid)) {
		t.Errorf("in the overlay, a file made in the set-group-id directory does not belong to its group %d:\n%s", r.gid, res.stdout)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(r.ws, "proj", "new"), &st); err != nil {
		t.Fatalf("after apply: %v\n%s", err, res.stderr)
	}
	if int(st.Gid) != r.gid {
		t.Errorf("after apply, proj/new belongs to group %d, want %d", st.Gid, r.gid)
	}
	if raw, _ := os.ReadFile(filepath.Join(r.ws, "proj", "notes")); string(raw) != "shared\nmore\n" {
		t.Errorf("after apply, proj/notes holds %q", raw)
	}
	res = r.run(t, nil, "run", "--backend", "overlay", "--", "sh", "-c", "echo x >> proj/notes")
	if strings.Contains(res.stderr, "Value too large") {
		t.Errorf("explicit overlay: bare EOVERFLOW:\n%s", res.stderr)
	}
	if res.code != 0 && !strings.Contains(res.stderr, "supplementary group") {
		t.Errorf("explicit overlay failed without naming the group (%d):\n%s", res.code, res.stderr)
	}
}

// TestS_STAGE_004_SupplementaryGroupsNegativeControl switches the group
// check off (failpoint build): where the group cannot be mapped, the
// overlay run then meets EOVERFLOW, so the test above could fail.
func TestS_STAGE_004_SupplementaryGroupsNegativeControl(t *testing.T) {
	t.Parallel()
	r := newGroupRig(t, true)
	res := r.run(t, []string{"WTX_DISABLE=overlay-groups"}, "run", "--backend", "overlay", "--", "sh", "-c", groupScript)
	if strings.Contains(res.stderr, "cannot stage") {
		t.Skipf("no overlay here: %s", res.stderr)
	}
	if res.code == 0 {
		t.Skip("the group is mapped here (newgidmap and /etc/subgid): no EOVERFLOW to provoke")
	}
	if !strings.Contains(res.stderr, "Value too large") {
		t.Errorf("with the check off, the command failed otherwise than with EOVERFLOW:\n%s", res.stderr)
	}
}

// TestS_STAGE_004_ViewRootModeOwner checks that the root of an overlay view
// has the workspace root's mode (set-group-id bit included) and, as far as
// the caller may give it, its owner and group.
func TestS_STAGE_004_ViewRootModeOwner(t *testing.T) {
	t.Parallel()
	ws, state := t.TempDir(), t.TempDir()
	mustDo(t, os.Chmod(ws, os.ModeSetgid|0o751))
	if os.Geteuid() == 0 {
		mustDo(t, os.Chown(ws, 4321, 4322))
	}
	fi, err := os.Stat(ws)
	mustDo(t, err)
	want := strconv.FormatUint(uint64(fi.Mode().Perm()), 8)
	if fi.Mode()&os.ModeSetgid != 0 {
		want = "2" + want
	}
	res := runWtx(t, ws, state, "run", "--backend", "overlay", "--", "stat", "-c", "%a %u %g", ".")
	if res.code != 0 {
		if strings.Contains(res.stderr, "cannot stage") {
			t.Skipf("no overlay here: %s", res.stderr)
		}
		t.Fatalf("run: %d\n%s", res.code, res.stderr)
	}
	got := strings.Fields(res.stdout)
	if len(got) != 3 || got[0] != want {
		t.Fatalf("view root: %q, want mode %s", res.stdout, want)
	}
	if os.Geteuid() == 0 && (got[1] != "4321" || got[2] != "4322") {
		t.Errorf("view root owned by %s:%s, want the workspace root's 4321:4322", got[1], got[2])
	}
}
