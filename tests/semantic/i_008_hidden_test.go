package semantic

import (
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestI008_HiddenDirNotAnAddition checks I-008 with S-STAGE-003 on overlay:
// a file created in the workspace under a nested exclude selector after the
// stage opened is hidden from the command, and the directories the view
// needs to hide it (made outside the stage, after it opened) are no change
// of the command: a command that makes nothing stages nothing, and one that
// writes a file beside the hidden one stages that file (with its directory,
// which the apply finds in place). Negative control: with the copied-up
// directories counted again (failpoint build, WTX_DISABLE=copy-up), the
// command that made nothing shows additions.
func TestI008_HiddenDirNotAnAddition(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skipf("no sh in PATH: %v", err)
	}
	for _, control := range []bool{false, true} {
		name := "protected"
		if control {
			name = "negative-control"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newBoundaryEnv(t, "overlay", control)
			if control {
				e.env = append(e.env, "WTX_DISABLE=copy-up")
			}
			mustWrite(t, filepath.Join(e.ws, "d", "keep"), "k\n")
			e.must("begin", "--backend", "overlay", "--name", "s", "--exclude", "d/**/*.pem")
			// Made outside the stage, after it opened.
			mustWrite(t, filepath.Join(e.ws, "d", "x", "k.pem"), "P\n")
			mustWrite(t, filepath.Join(e.ws, "d", "x", "y", "z.pem"), "Q\n")
			e.must("run", "--tx", "s", "--", "sh", "-c", `if cat d/x/k.pem d/x/y/z.pem >/dev/null 2>&1; then echo visible >"$OUT/visible"; fi`)
			if exists(filepath.Join(e.out, "visible")) {
				t.Fatal("an excluded file created after the stage opened is visible to the command")
			}
			got := e.changedPaths("s")
			if control {
				if len(got) == 0 {
					t.Fatal("with copied-up directories counted, the stage should show them: the test cannot tell")
				}
				return
			}
			if len(got) != 0 {
				t.Fatalf("a command that made nothing staged %v", got)
			}
			e.must("run", "--tx", "s", "--", "sh", "-c", "echo n > d/x/new")
			got = e.changedPaths("s")
			if !slices.Contains(got, "d/x/new") || slices.ContainsFunc(got, func(p string) bool { return filepath.Ext(p) == ".pem" }) {
				t.Fatalf("change set %v; want d/x/new and no excluded path", got)
			}
			before := snapshotTree(t, filepath.Join(e.ws, "d", "x"))
			e.must("apply", "s")
			if st := e.stageState("s"); st != "applied" {
				t.Fatalf("stage %s after apply", st)
			}
			added, removed := lineDiff(before, snapshotTree(t, filepath.Join(e.ws, "d", "x")))
			if len(removed) != 0 || len(added) != 1 {
				t.Fatalf("apply changed d/x by +%v -%v; want only new", added, removed)
			}
		})
	}
}
