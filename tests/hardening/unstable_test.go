//go:build linux

package hardening

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/wtxtest"
)

const unstableSize = 64 << 20

// rewriter rewrites the file at path in place, 1 MiB at a time, all 'A'
// then all 'B' then all 'A' again, until stopped: at any moment the file
// may hold a mix of the two, never anything else.
type rewriter struct {
	stop   chan struct{}
	done   sync.WaitGroup
	rounds int
	err    error
}

func startRewriter(path string) *rewriter {
	r := &rewriter{stop: make(chan struct{})}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		r.err = err
		return r
	}
	r.done.Add(1)
	go func() {
		defer r.done.Done()
		defer f.Close()
		chunks := [2][]byte{bytes.Repeat([]byte{'A'}, 1<<20), bytes.Repeat([]byte{'B'}, 1<<20)}
		for v := 1; ; v ^= 1 {
			for off := int64(0); off < unstableSize; off += 1 << 20 {
				select {
				case <-r.stop:
					return
				default:
				}
				if _, err := f.WriteAt(chunks[v], off); err != nil {
					r.err = err
					return
				}
			}
			r.rounds++
		}
	}()
	return r
}

func (r *rewriter) halt(t *testing.T) {
	t.Helper()
	close(r.stop)
	r.done.Wait()
	if r.err != nil {
		t.Fatalf("rewrite: %v", r.err)
	}
}

// whole reports whether data is one byte repeated.
func whole(data []byte) bool {
	return len(data) > 0 && bytes.Count(data, data[:1]) == len(data)
}

// TestApplyWhileStagedFileChanges applies a 64 MiB staged file while
// another writer rewrites it in place in the view: the apply either fails
// with precondition.file-changed-while-read and leaves the workspace as it
// was, or lands one whole version, never a mix.
func TestApplyWhileStagedFileChanges(t *testing.T) {
	top := scratchDir(t)
	e := &env{t: t, ctx: context.Background(), ws: filepath.Join(top, "ws"), state: filepath.Join(top, "state")}
	must(t, os.MkdirAll(e.ws, 0o755))
	must(t, os.WriteFile(e.wsPath("a.txt"), []byte("alpha\n"), 0o644))
	w, err := wtx.Open(e.ctx, e.ws, wtx.Options{StateDir: e.state, Home: filepath.Join(top, "home")})
	must(t, err)
	s, err := w.Begin(e.ctx, wtx.BeginOptions{Backend: "copy"})
	must(t, err)
	big := vpath(filepath.Join(e.state, "stages", s.ID(), "view"), "big.bin")
	must(t, os.WriteFile(big, bytes.Repeat([]byte{'A'}, unstableSize), 0o644))
	w.Close()
	before := e.snap()
	bin := wtxtest.Binary(t, false)

	r := startRewriter(big)
	exit, code, out := wtxJSON(t, bin, e.ws, e.state, "apply", s.ID())
	r.halt(t)
	t.Logf("apply: exit %d, code %q, %d whole rewrites during it", exit, code, r.rounds)
	switch exit {
	case 0:
		data, err := os.ReadFile(e.wsPath("big.bin"))
		must(t, err)
		if len(data) != unstableSize || !whole(data) {
			t.Errorf("the apply landed a mix of two versions (%d bytes, %d 'A')", len(data), bytes.Count(data, []byte{'A'}))
		}
	case 1:
		if code != wtx.CodeUnstable {
			t.Errorf("apply failed with %q, want %s\n%s", code, wtx.CodeUnstable, out)
		}
		if got := e.snap(); got != before {
			t.Errorf("a failed apply changed the workspace:\n%s", got)
		}
	default:
		t.Fatalf("apply: exit %d\n%s", exit, out)
	}
	if d := wtxtest.Debris(e.ws); len(d) > 0 {
		t.Errorf("temporary names left in the workspace: %v", d)
	}
}

// TestBeginWhileWorkspaceFileChanges runs a command in a new copy-backend
// stage while another writer keeps rewriting a 64 MiB workspace file in
// place: staging fails with precondition.file-changed-while-read and no
// stage is left behind.
func TestBeginWhileWorkspaceFileChanges(t *testing.T) {
	top := scratchDir(t)
	ws, state := filepath.Join(top, "ws"), filepath.Join(top, "state")
	must(t, os.MkdirAll(ws, 0o755))
	big := filepath.Join(ws, "big.bin")
	must(t, os.WriteFile(big, bytes.Repeat([]byte{'A'}, unstableSize), 0o644))
	bin := wtxtest.Binary(t, false)
	// Register the workspace first, so that only staging races the writer.
	if exit, code, out := wtxJSON(t, bin, ws, state, "list"); exit != 0 {
		t.Fatalf("list: exit %d, code %q\n%s", exit, code, out)
	}

	r := startRewriter(big)
	exit, code, out := wtxJSON(t, bin, ws, state, "run", "--backend", "copy", "--", "true")
	r.halt(t)
	t.Logf("run: exit %d, code %q, %d whole rewrites during it", exit, code, r.rounds)
	if exit == 0 || code != wtx.CodeUnstable {
		t.Fatalf("run while a file is rewritten: exit %d, code %q; want a failure with %s\n%s", exit, code, wtx.CodeUnstable, out)
	}
	if ents, _ := os.ReadDir(filepath.Join(state, "stages")); len(ents) > 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("stage directories left behind: %v", names)
	}
	exit, code, out = wtxJSON(t, bin, ws, state, "list")
	if exit != 0 || bytes.Contains([]byte(out), []byte(`"tx-`)) {
		t.Errorf("a stage is still listed (exit %d, code %q):\n%s", exit, code, out)
	}
}
