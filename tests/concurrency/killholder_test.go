package concurrency

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// TestC_006_KilledLockHolderDoesNotBlock kills an apply (SIGKILL, at a
// failpoint inside the locked section) again and again and asserts that
// the next apply, of another stage, completes promptly and lands.
func TestC_006_KilledLockHolderDoesNotBlock(t *testing.T) {
	kills := 12
	if soak() {
		kills = 1000
	}
	root := t.TempDir()
	e := env{bin: wtxtest.Binary(t, true), ws: filepath.Join(root, "ws"), state: filepath.Join(root, "state")}
	if err := os.MkdirAll(e.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.ws, "held"), []byte("base\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	victim, r := e.stage(t, "echo victim >> held")
	if victim == "" {
		t.Fatalf("wtx run: exit %d: %s", r.code, r.stderr)
	}
	points := []string{"apply:journaled", "apply:step", "apply:synced", "apply:committed"}
	var slowest time.Duration
	for i := range kills {
		point := points[i%len(points)]
		if r := e.wtx(t, []string{"WTX_FAILPOINT=" + point}, "apply", victim); r.code != -1 && r.code != 137 {
			// exec reports a death by signal as -1.
			t.Fatalf("kill %d: apply armed at %s exited %d, want killed: %s", i, point, r.code, r.stderr)
		}
		next, r := e.stage(t, fmt.Sprintf("echo %d > next-%d", i, i))
		if next == "" {
			t.Fatalf("kill %d: wtx run: exit %d: %s", i, r.code, r.stderr)
		}
		start := time.Now()
		r = e.wtx(t, nil, "apply", next)
		took := time.Since(start)
		slowest = max(slowest, took)
		if r.code != 0 {
			t.Fatalf("kill %d (at %s): the next apply exited %d: %s", i, point, r.code, r.stderr)
		}
		// A lock the dead holder kept would make the apply wait out the
		// whole lock wait (a minute) and fail: no busy machine is that slow
		// between two processes.
		if took >= time.Minute {
			t.Fatalf("kill %d (at %s): the next apply took %v", i, point, took)
		}
		if data, err := os.ReadFile(filepath.Join(e.ws, fmt.Sprintf("next-%d", i))); err != nil || string(data) != fmt.Sprintf("%d\n", i) {
			t.Fatalf("kill %d: next-%d = %q, %v", i, i, data, err)
		}
		if point == "apply:committed" {
			// The victim committed before it died: it has landed; open it again.
			if victim, r = e.stage(t, "echo victim >> held"); victim == "" {
				t.Fatalf("wtx run: exit %d: %s", r.code, r.stderr)
			}
		}
	}
	t.Logf("%d kills of the lock holder; slowest next apply %v", kills, slowest)
}
