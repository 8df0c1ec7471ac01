//go:build linux

package semantic

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// ownerRig is a workspace, a state root and a copy of wtx that one
// identity owns and runs (an ordinary user through setpriv when the suite
// runs as root), for the tests of what directory modes allow that user.
type ownerRig struct {
	ws, state, bin string
	id             identity
}

// newOwnerRig makes the rig: setup fills the workspace before it is given
// to id; failpoints picks the failpoint build.
func newOwnerRig(t *testing.T, id identity, failpoints bool, setup func(ws string)) *ownerRig {
	t.Helper()
	base, err := os.MkdirTemp("", "wtx-owner-")
	mustDo(t, err)
	t.Cleanup(func() {
		_ = filepath.Walk(base, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.IsDir() {
				_ = os.Chmod(p, 0o755) // so that the tree can go; RemoveAll reports what stays
			}
			return nil
		})
		removeUnmounted(t, base)
	})
	mustDo(t, os.Chmod(base, 0o755))
	r := &ownerRig{ws: filepath.Join(base, "ws"), state: filepath.Join(base, "state"), bin: filepath.Join(base, "wtx"), id: id}
	mustDo(t, os.Mkdir(r.ws, 0o755))
	mustDo(t, os.Mkdir(r.state, 0o700))
	setup(r.ws)
	copyExec(t, wtxtest.Binary(t, failpoints), r.bin)
	if id.uid != os.Geteuid() {
		for _, p := range []string{r.ws, r.state} {
			mustDo(t, filepath.Walk(p, func(p string, _ os.FileInfo, err error) error {
				if err != nil {
					return err
				}
				return os.Lchown(p, id.uid, id.uid)
			}))
		}
	}
	return r
}

// run runs wtx as the rig's identity on its workspace, with env added, and
// returns its exit code, standard output and standard error.
func (r *ownerRig) run(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	argv := append(append(append([]string{}, r.id.prefix...), r.bin, "-C", r.ws), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), "WTX_STATE_DIR="+r.state, "HOME="+r.state), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String(), errb.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, out.String(), errb.String()
}
