//go:build linux

package hardening

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// syncsOfNewFiles stages n new files in new directories, applies the stage
// under strace with env added, and returns the number of fsync, fdatasync
// and syncfs calls the apply made on the workspace (the blob store's own,
// a new store's first objects making its directories, are not counted).
func syncsOfNewFiles(t *testing.T, bin string, n int, env ...string) int {
	t.Helper()
	e := newEnv(t)
	s, view := e.begin()
	for i := range n {
		p := vpath(view, fmt.Sprintf("pkg/m%d/f%d.js", i%4, i))
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(fmt.Sprintf("module %d\n", i)), 0o644))
	}
	id := s.ID()
	e.w.Close()
	e.w = nil
	out := filepath.Join(t.TempDir(), "strace.txt")
	cmd := exec.Command("strace", "-f", "-y", "-e", "trace=fsync,fdatasync,syncfs", "-o", out, bin, "apply", id)
	cmd.Dir = e.ws
	cmd.Env = append(append(os.Environ(), "WTX_STATE_DIR="+e.state), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		if strings.Contains(string(b), "ptrace") {
			t.Skipf("strace cannot trace here: %s", b)
		}
		t.Fatalf("strace wtx apply: %v\n%s", err, b)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "pkg/m1/f1.js")); err != nil {
		t.Fatalf("the apply did not land the new files: %v", err)
	}
	data, err := os.ReadFile(out)
	must(t, err)
	ws := filepath.Clean(e.ws)
	calls := 0
	for _, l := range strings.Split(string(data), "\n") {
		// 1234  fsync(5</path/of/fd>) = 0
		_, rest, ok := strings.Cut(l, "<")
		if !ok || !strings.Contains(l, "sync") {
			continue
		}
		path, _, _ := strings.Cut(rest, ">")
		if path == ws || strings.HasPrefix(path, ws+"/") {
			calls++
		}
	}
	return calls
}

// TestNewFilesLandAfterOneSync: the files an apply creates in directories
// it makes are synced together, once, before they land under their names
// (a power loss never leaves a name with content it could undo): the
// number of syncs of an apply does not grow with the number of new files.
// With WTX_DISABLE=land-together (each synced and landed on its own) it
// must.
func TestNewFilesLandAfterOneSync(t *testing.T) {
	needStrace(t)
	bin := wtxtest.Binary(t, true)
	few, many := syncsOfNewFiles(t, bin, 4), syncsOfNewFiles(t, bin, 64)
	t.Logf("syncs of an apply of 4 new files: %d; of 64: %d", few, many)
	if many != few {
		t.Errorf("an apply of 64 new files made %d syncs, of 4 new files %d: the syncs grow with the files", many, few)
	}
	off := "WTX_DISABLE=land-together"
	fewOff, manyOff := syncsOfNewFiles(t, bin, 4, off), syncsOfNewFiles(t, bin, 64, off)
	if manyOff-fewOff < 60 {
		t.Errorf("negative control: with each new file synced on its own, 64 files made %d syncs and 4 made %d: the test cannot see per-file syncs", manyOff, fewOff)
	}
}
