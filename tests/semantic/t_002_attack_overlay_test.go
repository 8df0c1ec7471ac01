//go:build linux

package semantic

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// overlayAlias is an overlay filesystem mounted elsewhere whose upper
// directory is the workspace's tree or holds it: what is written through
// it lands in the real workspace, though it is a filesystem of its own (no
// other mount of the workspace's device).
type overlayAlias struct {
	name string
	// upper is the overlay's upper directory, given the rig.
	upper func(r *t002Rig) string
	// through is the file the command writes, beneath the overlay's mount
	// point; landed is where that file is in the real workspace.
	through, landed string
}

var overlayAliases = []overlayAlias{
	{name: "upper-is-the-workspace", upper: func(r *t002Rig) string { return r.ws },
		through: "pwned.txt", landed: "pwned.txt"},
	{name: "upper-above-the-workspace", upper: func(r *t002Rig) string { return r.base },
		through: "ws/pwned.txt", landed: "pwned.txt"},
	{name: "upper-inside-the-workspace", upper: func(r *t002Rig) string { return filepath.Join(r.ws, "src") },
		through: "pwned.txt", landed: "src/pwned.txt"},
}

// mountOverlayAlias mounts an overlay with upper directory upper (its
// lower and work directories beside its mount point, in a directory of
// their own that anyone may enter) and returns its mount point and what
// unmounts it.
func mountOverlayAlias(t *testing.T, upper string) (string, func()) {
	t.Helper()
	aux, err := os.MkdirTemp("", "wtx-t002-ovl-")
	mustDo(t, err)
	mustDo(t, os.Chmod(aux, 0o755))
	lower, work, at := filepath.Join(aux, "lower"), filepath.Join(aux, "work"), filepath.Join(aux, "at")
	for _, d := range []string{lower, work, at} {
		mustDo(t, os.Mkdir(d, 0o755))
	}
	opts := "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work
	if err := unix.Mount("overlay", at, "overlay", 0, opts); err != nil {
		_ = os.RemoveAll(aux) // the test is skipped: nothing else was made
		t.Skipf("cannot mount an overlay here (%v): the case needs one", err)
	}
	return at, func() {
		if err := unix.Unmount(at, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", at, err)
			return
		}
		mustDo(t, os.RemoveAll(aux))
	}
}

// TestT_002_AttackOverlayOfTheWorkspace checks T-002 for another mount of
// the workspace that is not a bind: an overlay whose upper directory is
// the workspace, a directory above it or one inside it. A command run in
// a stage (overlay and copy, as root and as an ordinary user) writes
// through the overlay's mount point; the overlay is read-only in the
// command's namespace, so the real workspace is unchanged. Before, the
// search for other mounts of the workspace went by device only and never
// found the overlay (a device of its own): the write landed in the
// workspace on every backend. Negative control (failpoint build,
// WTX_DISABLE=confine-overlay): the write lands. Mounting the overlays
// needs root.
func TestT_002_AttackOverlayOfTheWorkspace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting an overlay over another directory needs root")
	}
	for _, id := range t002IDs(t) {
		t.Run(id.name, func(t *testing.T) {
			t.Parallel()
			r := newT002Rig(t, id, "")
			for _, c := range overlayAliases {
				at, unmount := mountOverlayAlias(t, c.upper(r))
				for _, b := range []string{"overlay", "copy"} {
					for _, control := range []bool{false, true} {
						overlayAliasRun(t, r, c, at, b, control)
					}
				}
				unmount()
			}
		})
	}
}

// overlayAliasRun runs the command that writes through the overlay at at
// in a stage on backend b, and judges where the write went.
func overlayAliasRun(t *testing.T, r *t002Rig, c overlayAlias, at, b string, control bool) {
	t.Helper()
	var env []string
	if control {
		env = []string{"WTX_DISABLE=confine-overlay"}
	}
	res := r.run(t, true, env, "run", "--backend", b, "--",
		"sh", "-c", `echo pwned > "$0"`, filepath.Join(at, c.through))
	landed := filepath.Join(r.ws, c.landed)
	_, err := os.Lstat(landed)
	switch {
	case control && err != nil:
		t.Errorf("%s on %s: with the overlay left writable the write did not land: the case cannot fail (%v)", c.name, b, res)
	case !control && err == nil:
		t.Errorf("%s on %s: the command wrote the real workspace through an overlay of it (%v)", c.name, b, res)
	case !control && res.code == 125:
		t.Errorf("%s on %s: the run failed in wtx itself: %v", c.name, b, res)
	}
	// The next run starts from the workspace as it was. The file goes
	// through the overlay, which would not see it gone from its upper
	// directory behind its back.
	_ = os.Remove(filepath.Join(at, c.through)) // absent where the write did not land
}
