package wtx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// livingWith lists the pids of live processes whose arguments hold marker.
func livingWith(marker string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc") // nothing found is checked against a positive sighting below
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(marker)) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
				continue
			}
		}
		out = append(out, pid)
	}
	return out
}

// TestL002_CancelStopsContainer checks that cancelling the context of
// Stage.Run stops the command's whole container (the command and what it
// detached, both ignoring SIGTERM) and that Run returns promptly, naming
// them, on every backend that can stage here.
func TestL002_CancelStopsContainer(t *testing.T) {
	for _, backend := range []string{"overlay", "copy"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			base := t.TempDir()
			ws, state := filepath.Join(base, "ws"), filepath.Join(base, "state")
			if err := os.Mkdir(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			w, err := Open(ctx, ws, Options{StateDir: state, Home: filepath.Join(base, "home")})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			st, err := w.Begin(ctx, BeginOptions{Backend: backend})
			if err != nil {
				if strings.Contains(err.Error(), "cannot stage") || errors.Is(err, errors.ErrUnsupported) {
					t.Skipf("the %s backend cannot stage here: %v", backend, err)
				}
				t.Fatal(err)
			}
			marker := fmt.Sprintf("wtx-l002-cancel-%d-%s", os.Getpid(), backend)
			t.Cleanup(func() {
				for _, pid := range livingWith(marker) {
					_ = syscall.Kill(pid, syscall.SIGKILL) // cleanup after a failure
				}
			})
			// The command ignores SIGTERM; one detached child does too.
			script := `trap "" TERM; setsid sh -c 'trap "" TERM; while :; do sleep 1; done' ` + marker + ` & while :; do sleep 1; done`
			cctx, cancel := context.WithCancel(ctx)
			go func() {
				deadline := time.Now().Add(wtxtest.Patience(t))
				for len(livingWith(marker)) < 2 && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
				}
				cancel()
			}()
			var out bytes.Buffer
			start := time.Now()
			res, err := st.Run(cctx, []string{"sh", "-c", script, marker}, RunOptions{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &out, Env: os.Environ()})
			took := time.Since(start)
			// A cancelled run is finished like any other: its result names
			// what was stopped (the command among them).
			if err != nil {
				t.Fatalf("Run = %v\n%s", err, out.String())
			}
			if len(res.Stopped) < 2 || res.Signal == "" {
				t.Errorf("Run = %+v, want the command killed and at least two processes stopped", res)
			}
			// SIGTERM is ignored: the grace period, then SIGKILL.
			if took > 8*time.Second {
				t.Errorf("Run returned %v after it started, long after the cancel", took)
			}
			if left := livingWith(marker); len(left) > 0 {
				t.Errorf("processes of the cancelled run are still alive: %v", left)
			}
		})
	}
}
