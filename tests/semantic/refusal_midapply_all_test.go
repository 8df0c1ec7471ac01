package semantic

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// TestRefusalMidApplyListsEveryPath: two files change outside the stage
// while its apply runs (after its checks passed): the apply is refused
// with nothing written, and the refusal names both paths, not only the
// first the executor met, so the repair is made once. Negative control:
// with WTX_DISABLE=all-changed only the first path is named.
func TestRefusalMidApplyListsEveryPath(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		got := midApplyConflicts(t, control)
		both := slices.Contains(got, "f1") && slices.Contains(got, "f3")
		if !control && !both {
			t.Errorf("the refusal names %v, want f1 and f3", got)
		}
		if control && both {
			t.Errorf("negative control (all-changed off): the refusal still names %v", got)
		}
	}
}

func midApplyConflicts(t *testing.T, control bool) []string {
	ws, state := t.TempDir(), t.TempDir()
	for _, f := range []string{"f1", "f2", "f3"} {
		if err := os.WriteFile(filepath.Join(ws, f), []byte("old\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if r := runWtx(t, ws, state, "run", "--backend", "copy", "--name", "s", "--", "sh", "-c", "for f in f1 f2 f3; do echo new > $f; done"); r.code != 0 {
		t.Fatalf("wtx run: %v", r)
	}
	apply := exec.Command(wtxtest.Binary(t, true), "-C", ws, "--json", "apply", "s")
	hold, held := wtxtest.NewHold(t, "apply:temp-prepared")
	apply.Env = append(append(os.Environ(), "WTX_STATE_DIR="+state), held...)
	if control {
		apply.Env = append(apply.Env, "WTX_DISABLE=all-changed")
	}
	var out bytes.Buffer
	apply.Stdout = &out
	if err := apply.Start(); err != nil {
		t.Fatal(err)
	}
	// Once the apply put its first temporary file, its checks are done:
	// change two of its paths behind it.
	hold.Wait(t, apply.Process)
	if m, _ := filepath.Glob(filepath.Join(ws, ".wtx-tmp-*")); len(m) == 0 {
		_ = apply.Process.Kill() // the test fails here either way
		t.Fatal("the apply put no temporary file in the workspace")
	}
	for _, f := range []string{"f1", "f3"} {
		if err := os.WriteFile(filepath.Join(ws, f), []byte("outside\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hold.Release()
	_ = apply.Wait() // its exit status is checked below
	if code := apply.ProcessState.ExitCode(); code != 2 {
		t.Fatalf("apply exited %d, want 2 (refused): %s", code, out.String())
	}
	var a struct {
		Error struct {
			Code      string
			Conflicts []struct{ Path string }
		}
	}
	if err := json.Unmarshal(out.Bytes(), &a); err != nil || a.Error.Code != "refusal.target-changed" {
		t.Fatalf("apply answer: %s (%v)", out.String(), err)
	}
	for f, want := range map[string]string{"f1": "outside\n", "f2": "old\n", "f3": "outside\n"} {
		if b, _ := os.ReadFile(filepath.Join(ws, f)); string(b) != want {
			t.Errorf("%s after the refused apply: %q, want %q", f, b, want)
		}
	}
	var paths []string
	for _, c := range a.Error.Conflicts {
		paths = append(paths, c.Path)
	}
	return paths
}
