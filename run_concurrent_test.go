package wtx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestL001_ConcurrentRunsInOneProcess runs two stages, each of its own
// workspace, at the same time from two goroutines of one process, several
// times, on each backend that can stage here, with a state root per
// workspace and with one shared: neither run may be refused as busy, and
// afterwards neither stage may be held (a busy lock's descriptor that one
// run's helper inherited from the other would hold it).
func TestL001_ConcurrentRunsInOneProcess(t *testing.T) {
	for _, backend := range []string{"overlay", "copy"} {
		for _, shared := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/shared=%v", backend, shared), func(t *testing.T) {
				t.Parallel()
				concurrentRuns(t, backend, shared)
			})
		}
	}
}

func concurrentRuns(t *testing.T, backend string, shared bool) {
	ctx := context.Background()
	base := t.TempDir()
	var stages [2]*Stage
	for i := range stages {
		ws := filepath.Join(base, fmt.Sprintf("ws%d", i))
		state := filepath.Join(base, fmt.Sprintf("state%d", i))
		if shared {
			state = filepath.Join(base, "state")
		}
		if err := os.Mkdir(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		w, err := Open(ctx, ws, Options{StateDir: state, Home: filepath.Join(base, "home")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		st, err := w.Begin(ctx, BeginOptions{Backend: backend})
		if err != nil {
			if strings.Contains(err.Error(), "cannot stage") || errors.Is(err, errors.ErrUnsupported) {
				t.Skipf("the %s backend cannot stage here: %v", backend, err)
			}
			t.Fatal(err)
		}
		stages[i] = st
	}
	for round := range 3 {
		var wg sync.WaitGroup
		errs := make([]error, len(stages))
		for i, st := range stages {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var out bytes.Buffer
				script := fmt.Sprintf("echo %d > f%d; sleep 0.05", round, i)
				res, err := st.Run(ctx, []string{"sh", "-c", script}, RunOptions{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &out, Env: os.Environ()})
				if err == nil && res.ExitCode != 0 {
					err = fmt.Errorf("exit %d: %s", res.ExitCode, out.String())
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: run %d: %v", round, i, err)
			}
		}
		for i, st := range stages {
			if info, err := st.Running(ctx); err != nil || info != nil {
				t.Fatalf("round %d: stage %d after its run: running %+v, %v", round, i, info, err)
			}
		}
	}
}
