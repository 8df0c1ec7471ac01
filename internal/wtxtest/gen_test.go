package wtxtest

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestChangeScriptRunsAndCopies runs generated scripts under sh -e on their
// generated trees: each must succeed, change the tree, be reproducible from
// its seed, and CopyTree must reproduce both trees exactly.
func TestChangeScriptRunsAndCopies(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	for seed := uint64(1); seed <= 20; seed++ {
		dir := t.TempDir()
		ws := filepath.Join(dir, "ws")
		if err := os.Mkdir(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := RandomTree(rand.New(rand.NewPCG(seed, 1)), ws, 15); err != nil {
			t.Fatal(err)
		}
		script, err := ChangeScript(rand.New(rand.NewPCG(seed, 2)), ws, 8)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ChangeScript(rand.New(rand.NewPCG(seed, 2)), ws, 8)
		if err != nil {
			t.Fatal(err)
		}
		if again != script {
			t.Fatalf("seed %d: the same seed gave two scripts", seed)
		}
		cp := filepath.Join(dir, "copy")
		if err := CopyTree(ws, cp); err != nil {
			t.Fatal(err)
		}
		if a, b := MustSnapshot(t, ws), MustSnapshot(t, cp); a != b {
			t.Fatalf("seed %d: copy differs:\n%s\n---\n%s", seed, a, b)
		}
		before := MustSnapshot(t, ws)
		cmd := exec.Command("sh", "-c", script)
		cmd.Dir = ws
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("seed %d: script failed: %v\n%s\n%s", seed, err, out, script)
		}
		if MustSnapshot(t, ws) == before {
			t.Logf("seed %d: script made no net change", seed)
		}
	}
}
