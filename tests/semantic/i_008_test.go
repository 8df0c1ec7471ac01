package semantic

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// TestI008_ExcludeEverywhere checks I-008: --exclude holds for every way
// into a stage. Per-file reads and writes of an excluded path are refused
// as refusal.boundary (exit 2) with nothing written; a batch with one such
// item is refused whole before anything is staged; a command's writes
// under an excluded path never enter the change set and are reported as
// left out (run JSON, receipt, summary); on overlay, a path created in the
// workspace under an exclude selector after the stage opened is hidden
// from the command too. Applying the stage never touches an excluded path.
func TestI008_ExcludeEverywhere(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skipf("no sh in PATH: %v", err)
	}
	for _, backend := range []string{"copy", "overlay"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newBoundaryEnv(t, backend, false)
			mustWrite(t, filepath.Join(e.ws, "keep", "k"), "k\n")
			e.must("begin", "--backend", backend, "--name", "s", "--exclude", "keep", "--exclude", "**/*.key", "--exclude", "build", "--exclude", "gen")
			// Created in the workspace after the stage opened.
			mustWrite(t, filepath.Join(e.ws, "gen", "secret"), "secret\n")
			mustWrite(t, filepath.Join(e.ws, "late.key"), "late\n")
			before := snapshotTree(t, e.ws)

			for _, args := range [][]string{
				{"read", "keep/k", "--tx", "s"},
				{"write", "keep/k", "--tx", "s"},
				{"write", "build/x", "--tx", "s"},
				{"write", "sub/new.key", "--tx", "s"},
				{"read", "gen/secret", "--tx", "s"},
				{"edit", "keep/k", "--old", "k", "--new", "z", "--tx", "s"},
				{"rm", "keep/k", "--tx", "s"},
				{"rm", "keep", "--tx", "s"},
			} {
				wantCode(t, e.run(append([]string{"--json"}, args...)...), 2, "refusal.boundary")
			}

			// A batch is refused whole, before any stage exists.
			cmd := exec.Command(e.bin, "-C", e.ws, "--json", "batch", "--atomic", "--exclude", "keep")
			cmd.Env = append(os.Environ(), "WTX_STATE_DIR="+e.st)
			cmd.Stdin = strings.NewReader(`{"command":"write","path":"ok.txt","content":"ok\n"}` + "\n" +
				`{"command":"write","path":"keep/x","content":"x\n"}` + "\n")
			out, _ := cmd.Output()
			wantCode(t, wtxResult{code: cmd.ProcessState.ExitCode(), stdout: string(out)}, 2, "refusal.boundary")

			// A command's writes under excluded paths: left out, said so.
			var run struct {
				Changes []struct {
					Path string `json:"path"`
				} `json:"changes"`
				LeftOut []struct {
					Path string `json:"path"`
					Type string `json:"type"`
				} `json:"left_out"`
				Receipt struct {
					LeftOut      int      `json:"left_out"`
					LeftOutPaths []string `json:"left_out_paths"`
				} `json:"receipt"`
			}
			e.runJSON(&run, "run", "--tx", "s", "--", "sh", "-c",
				`if cat gen/secret late.key >/dev/null 2>&1; then echo visible >"$OUT/visible"; fi; `+
					`mkdir -p build keep gen && echo x >build/x && echo y >keep/y && echo w >gen/w && echo k >s.key && echo n >n.txt`)
			var changed, left []string
			for _, c := range run.Changes {
				changed = append(changed, c.Path)
			}
			for _, l := range run.LeftOut {
				left = append(left, l.Path+":"+l.Type)
			}
			if !slices.Equal(changed, []string{"n.txt"}) {
				t.Errorf("change set %v, want only n.txt", changed)
			}
			if want := []string{"build:dir", "gen:dir", "keep:dir", "s.key:file"}; !slices.Equal(left, want) {
				t.Errorf("left out %v, want %v", left, want)
			}
			if run.Receipt.LeftOut != 4 || len(run.Receipt.LeftOutPaths) != 4 {
				t.Errorf("receipt says %d left out (%v), want 4", run.Receipt.LeftOut, run.Receipt.LeftOutPaths)
			}
			if exists(filepath.Join(e.out, "visible")) {
				t.Errorf("paths created under --exclude after the stage opened were visible to the command")
			}
			if r := e.must("run", "--tx", "s", "--", "true"); !strings.Contains(r.stderr, "left out by --exclude") || !strings.Contains(r.stderr, "s.key") {
				t.Errorf("the run summary does not say what was left out:\n%s", r.stderr)
			}
			if got := snapshotTree(t, e.ws); got != before {
				t.Fatalf("the workspace changed before apply:\n%s\nwant:\n%s", got, before)
			}
			e.must("apply", "s")
			if added, removed := lineDiff(before, snapshotTree(t, e.ws)); !slices.Equal(added, []string{`n.txt -rw-r--r-- "n\n"`}) || len(removed) != 0 {
				t.Errorf("apply added %q and removed %q, want only n.txt added", added, removed)
			}
		})
	}
}

// TestI008_NegativeControl switches the protection off (failpoint build,
// WTX_DISABLE=exclude): a write to an excluded path is then reported as a
// success that can never land, and on overlay a path created under an
// exclude selector after the stage opened is visible to the command.
func TestI008_NegativeControl(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skipf("no sh in PATH: %v", err)
	}
	for _, backend := range []string{"copy", "overlay"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newBoundaryEnv(t, backend, true)
			e.env = append(e.env, "WTX_DISABLE=exclude")
			mustWrite(t, filepath.Join(e.ws, "keep", "k"), "k\n")
			e.must("begin", "--backend", backend, "--name", "s", "--exclude", "build", "--exclude", "gen")
			if r := e.run("write", "build/x", "--tx", "s"); r.code != 0 {
				t.Fatalf("with the check off, a write to an excluded path should be accepted: exit %d\n%s", r.code, r.stderr)
			}
			if backend == "overlay" {
				mustWrite(t, filepath.Join(e.ws, "gen", "secret"), "secret\n")
				e.must("run", "--tx", "s", "--", "sh", "-c", `if cat gen/secret >/dev/null 2>&1; then echo visible >"$OUT/visible"; fi`)
				if !exists(filepath.Join(e.out, "visible")) {
					t.Fatalf("with the check off, a path created under --exclude after open should be visible on overlay")
				}
			}
		})
	}
}

func mustWrite(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func snapshotTree(t *testing.T, root string) string { return wtxtest.MustSnapshot(t, root) }

// lineDiff returns the lines only in b and the lines only in a.
func lineDiff(a, b string) (added, removed []string) {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ma, mb := in(a), in(b)
	for l := range mb {
		if !ma[l] {
			added = append(added, l)
		}
	}
	for l := range ma {
		if !mb[l] {
			removed = append(removed, l)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	return added, removed
}
