//go:build linux

package hardening

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// wtxJSON runs the binary with --json in ws against the state root and
// returns its exit status, the error code it printed ("" on success) and
// its whole output.
func wtxJSON(t *testing.T, bin, ws, state string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--json"}, args...)...)
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "WTX_STATE_DIR="+state)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	exit := 0
	if ee, ok := err.(*exec.ExitError); ok {
		exit = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run wtx %v: %v", args, err)
	}
	var env struct {
		Error *struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	code := ""
	if json.Unmarshal(out.Bytes(), &env) == nil && env.Error != nil {
		code = env.Error.Code
	}
	return exit, code, out.String() + errOut.String()
}

// fill writes a file at path that leaves about leave bytes free on its
// filesystem.
func fill(t *testing.T, path string, leave int64) {
	t.Helper()
	var st unix.Statfs_t
	must(t, unix.Statfs(filepath.Dir(path), &st))
	n := int64(st.Bavail)*int64(st.Bsize) - leave
	if n <= 0 {
		t.Fatalf("only %d bytes free on %s", n+leave, filepath.Dir(path))
	}
	must(t, os.WriteFile(path, bytes.Repeat([]byte{'.'}, int(n)), 0o600))
}

// TestRealNoSpace applies a large staged file onto a small tmpfs that holds
// the workspace and the state root, filled so that the apply runs out of
// space part way: it must fail with io.no-space (exit 1), leave the
// workspace exactly as it was with no temporary names, and succeed once
// space is freed.
func TestRealNoSpace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	const big = 4 << 20
	mnt := t.TempDir()
	if err := unix.Mount("tmpfs", mnt, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=16m,mode=0755"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	e := &env{t: t, ctx: context.Background(), ws: filepath.Join(mnt, "ws"), state: filepath.Join(mnt, "state")}
	must(t, os.MkdirAll(filepath.Join(e.ws, "dir"), 0o755))
	must(t, os.WriteFile(e.wsPath("a.txt"), []byte("alpha\n"), 0o644))
	must(t, os.WriteFile(e.wsPath("dir/b.txt"), []byte("bravo\n"), 0o644))
	w, err := wtx.Open(e.ctx, e.ws, wtx.Options{StateDir: e.state, Home: filepath.Join(e.state, "no-home")})
	must(t, err)
	s, err := w.Begin(e.ctx, wtx.BeginOptions{Backend: "copy"})
	must(t, err)
	view := filepath.Join(e.state, "stages", s.ID(), "view")
	payload := bytes.Repeat([]byte("0123456789abcdef"), big/16)
	must(t, os.WriteFile(vpath(view, "dir/big.bin"), payload, 0o644))
	must(t, os.WriteFile(vpath(view, "a.txt"), []byte("changed alpha\n"), 0o644))
	w.Close()
	before, after := e.snap(), wtxtest.MustSnapshot(t, view)

	// The apply stores the payload (4 MiB) and then writes it into the
	// workspace (4 MiB more): leave room for the first only.
	filler := filepath.Join(mnt, "filler")
	fill(t, filler, big+big/2)
	bin := wtxtest.Binary(t, false)
	exit, code, out := wtxJSON(t, bin, e.ws, e.state, "apply", s.ID())
	if exit != 1 || code != wtx.CodeNoSpace {
		t.Fatalf("apply on a full disk: exit %d, code %q; want 1, %s\n%s", exit, code, wtx.CodeNoSpace, out)
	}
	t.Logf("full disk: %s", out)
	if got := e.snap(); got != before {
		t.Errorf("a failed apply changed the workspace:\n%s", got)
	}
	if d := wtxtest.Debris(e.ws); len(d) > 0 {
		t.Errorf("temporary names left in the workspace: %v", d)
	}
	if d, _ := filepath.Glob(filepath.Join(e.state, "tmp", "*")); len(d) > 0 {
		t.Errorf("temporary files left in the state root: %v", d)
	}

	must(t, os.Remove(filler))
	if exit, code, out := wtxJSON(t, bin, e.ws, e.state, "apply", s.ID()); exit != 0 {
		t.Fatalf("apply after freeing space: exit %d, code %q\n%s", exit, code, out)
	}
	if got := e.snap(); got != after {
		t.Errorf("the apply after freeing space did not land the view:\n%s", got)
	}
}
