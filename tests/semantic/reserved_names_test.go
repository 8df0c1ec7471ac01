package semantic

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReservedNames_NoSilentDrop checks that wtx's reserved names
// (.wtx-tmp-*, its temporary files during an apply) are never dropped
// silently (issue: "no silent drops"): a per-file write, edit, rm or read
// naming one is refused up front as usage.reserved-name; a batch holding
// one is refused whole, so batch --atomic stays all-or-nothing; a command's
// write to one shows in the change set, marked, and every apply that
// selects it is refused as usage.reserved-name with nothing written, while
// the other paths still apply.
func TestReservedNames_NoSilentDrop(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skipf("no sh in PATH: %v", err)
	}
	for _, backend := range []string{"copy", "overlay"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newBoundaryEnv(t, backend, false)
			e.must("begin", "--backend", backend, "--name", "s")
			for _, args := range [][]string{
				{"write", ".wtx-tmp-x", "--tx", "s"},
				{"write", "d/.wtx-tmp-y/z", "--tx", "s"},
				{"read", ".wtx-tmp-x", "--tx", "s"},
				{"edit", ".wtx-tmp-x", "--old", "a", "--new", "b", "--tx", "s"},
				{"rm", "dir/.wtx-tmp-restore-1", "--tx", "s"},
			} {
				wantCode(t, e.run(append([]string{"--json"}, args...)...), 1, "usage.reserved-name")
			}
			before := snapshotTree(t, e.ws)
			if r := batch(e, `{"command":"write","path":"ok.txt","content":"ok\n"}`, `{"command":"write","path":".wtx-tmp-evil","content":"x\n"}`); r.code != 1 || errorCode(t, r) != "usage.reserved-name" {
				t.Fatalf("batch with a reserved name: exit %d, code %q; want 1, usage.reserved-name\n%s", r.code, errorCode(t, r), r.stdout)
			}
			if got := snapshotTree(t, e.ws); got != before {
				t.Fatalf("a refused batch changed the workspace:\n%s", got)
			}

			// A command's write to a reserved name.
			r := e.must("run", "--tx", "s", "--", "sh", "-c", "echo x >.wtx-tmp-cmd; echo ok >ok.txt")
			if !strings.Contains(r.stderr, ".wtx-tmp-cmd (reserved name") {
				t.Errorf("the run summary does not mark the reserved name:\n%s", r.stderr)
			}
			if got := e.changedPaths("s"); !slices.Equal(got, []string{".wtx-tmp-cmd", "ok.txt"}) {
				t.Errorf("change set %v, want the reserved name shown with ok.txt", got)
			}
			wantCode(t, e.run("--json", "apply", "s"), 1, "usage.reserved-name")
			if got := snapshotTree(t, e.ws); got != before {
				t.Fatalf("a refused apply changed the workspace:\n%s", got)
			}
			e.must("apply", "s", "--path", "ok.txt")
			if readWS(t, e.ws, "ok.txt") != "ok\n" || exists(filepath.Join(e.ws, ".wtx-tmp-cmd")) {
				t.Errorf("apply --path ok.txt: want ok.txt applied and the reserved name not")
			}
			e.must("run", "--tx", "s", "--", "rm", ".wtx-tmp-cmd")
			e.must("apply", "s")
			if got := e.stageState("s"); got == "open" {
				t.Errorf("stage s still open after its last path was applied")
			}
		})
	}
}

// TestReservedNames_NegativeControl switches the reserved-name handling off
// (failpoint build, WTX_DISABLE=reserved): a batch then reports success
// while its reserved-name item never lands, and a command's write to a
// reserved name vanishes from the change set.
func TestReservedNames_NegativeControl(t *testing.T) {
	t.Parallel()
	e := newBoundaryEnv(t, "copy", true)
	e.env = append(e.env, "WTX_DISABLE=reserved")
	r := batch(e, `{"command":"write","path":"ok.txt","content":"ok\n"}`, `{"command":"write","path":".wtx-tmp-evil","content":"x\n"}`)
	if r.code != 0 || !exists(filepath.Join(e.ws, "ok.txt")) || exists(filepath.Join(e.ws, ".wtx-tmp-evil")) {
		t.Fatalf("with the check off, the batch should apply ok.txt and drop the reserved item silently (exit %d)\n%s%s", r.code, r.stdout, r.stderr)
	}
	e.must("begin", "--backend", "copy", "--name", "s")
	e.must("run", "--tx", "s", "--", "sh", "-c", "echo x >.wtx-tmp-cmd")
	if got := e.changedPaths("s"); len(got) != 0 {
		t.Fatalf("with the check off, the reserved name should vanish from the change set, got %v", got)
	}
}

// batch runs wtx --json batch --atomic with lines on stdin.
func batch(e *boundaryEnv, lines ...string) wtxResult {
	e.t.Helper()
	cmd := exec.Command(e.bin, "-C", e.ws, "--json", "batch", "--atomic")
	cmd.Env = append(append(os.Environ(), "WTX_STATE_DIR="+e.st), e.env...)
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			e.t.Fatal(err)
		}
	}
	return wtxResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}
