package semantic

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// TestS_STAGE_013_DirectoryReplacedMidApply checks S-STAGE-013 (and 012)
// when a directory of the workspace is replaced by a symbolic link while an
// apply has already put its temporary files in it: the apply fails, nothing
// is written through the link, and once the directory is back the next wtx
// command leaves no temporary file of wtx in it: a reported failure leaves
// no effect. (Before, the failed apply dropped its journal while a
// temporary file stayed in the moved directory.)
func TestS_STAGE_013_DirectoryReplacedMidApply(t *testing.T) {
	t.Parallel()
	ws, state, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
	d := filepath.Join(ws, "d")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"f1", "f2"} {
		if err := os.WriteFile(filepath.Join(d, f), []byte("old\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if r := runWtx(t, ws, state, "run", "--backend", "copy", "--name", "s", "--", "sh", "-c", "echo new > d/f1; echo new > d/f2"); r.code != 0 {
		t.Fatalf("wtx run: %v", r)
	}
	apply := exec.Command(wtxtest.Binary(t, true), "-C", ws, "apply", "s")
	hold, held := wtxtest.NewHold(t, "apply:temp-prepared")
	apply.Env = append(append(os.Environ(), "WTX_STATE_DIR="+state), held...)
	if err := apply.Start(); err != nil {
		t.Fatal(err)
	}
	// Once the first temporary file is in d, replace d by a link.
	hold.Wait(t, apply.Process)
	if m, _ := filepath.Glob(filepath.Join(d, ".wtx-tmp-*")); len(m) == 0 {
		_ = apply.Process.Kill() // the test fails here either way
		t.Fatal("the apply put no temporary file in d")
	}
	moved := filepath.Join(ws, "d.moved")
	if err := os.Rename(d, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, d); err != nil {
		t.Fatal(err)
	}
	hold.Release()
	err := apply.Wait()
	if err := os.Remove(d); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(moved, d); err != nil {
		t.Fatal(err)
	}
	if err == nil {
		t.Fatal("the apply succeeded while its directory was a symbolic link")
	}
	if entries, _ := os.ReadDir(elsewhere); len(entries) > 0 {
		t.Errorf("the apply wrote through the link: %v", entries)
	}
	runWtx(t, ws, state, "list") // any command recovers
	if m, _ := filepath.Glob(filepath.Join(d, ".wtx-tmp-*")); len(m) > 0 {
		t.Errorf("a failed apply left temporary files in the workspace: %v", m)
	}
	for _, f := range []string{"f1", "f2"} {
		if b, _ := os.ReadFile(filepath.Join(d, f)); string(b) != "old\n" {
			t.Errorf("d/%s after a failed apply: %q", f, b)
		}
	}
}
