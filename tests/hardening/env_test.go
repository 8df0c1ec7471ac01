//go:build linux

package hardening

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// soak reports whether WTX_SOAK=1 asks for the long runs.
func soak() bool { return os.Getenv("WTX_SOAK") == "1" }

// env is one hostile-input fixture: a workspace, a canary directory outside
// it (on the same file system, so hard links to it can be made) and a
// state root.
type env struct {
	t                 *testing.T
	ctx               context.Context
	ws, canary, state string
	w                 *wtx.Workspace
	umask             int
}

// baseTree is the workspace every case starts from.
var baseTree = []struct {
	path, content string // content "" with a trailing slash in path: a directory
	perm          os.FileMode
}{
	{"a.txt", "alpha\n", 0o644},
	{"exec.sh", "#!/bin/sh\n", 0o755},
	{"dir/", "", 0o755},
	{"dir/b.txt", "bravo\n", 0o644},
	{"sub/", "", 0o755},
	{"sub/x/", "", 0o755},
	{"sub/x/y.txt", "yankee\n", 0o644},
	{"empty/", "", 0o755},
}

func newEnv(t *testing.T) *env {
	t.Helper()
	top := t.TempDir()
	e := &env{t: t, ctx: context.Background(),
		ws: filepath.Join(top, "ws"), canary: filepath.Join(top, "canary"), state: filepath.Join(top, "state")}
	for _, d := range []string{e.ws, filepath.Join(e.canary, "cdir")} {
		must(t, os.MkdirAll(d, 0o755))
	}
	must(t, os.WriteFile(filepath.Join(e.canary, "secret"), []byte("canary secret\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(e.canary, "cdir", "f"), []byte("canary file\n"), 0o644))
	for _, b := range baseTree {
		p := filepath.Join(e.ws, filepath.FromSlash(b.path))
		if b.path[len(b.path)-1] == '/' {
			must(t, os.MkdirAll(p, 0o755))
			must(t, os.Chmod(p, b.perm))
			continue
		}
		must(t, os.WriteFile(p, []byte(b.content), b.perm))
		must(t, os.Chmod(p, b.perm))
	}
	must(t, os.Symlink("a.txt", filepath.Join(e.ws, "link")))
	return e
}

// open opens the workspace (running recovery first, as every command does).
func (e *env) open() (*wtx.Workspace, error) {
	return wtx.Open(e.ctx, e.ws, wtx.Options{StateDir: e.state, Home: filepath.Join(e.state, "no-home")})
}

func (e *env) mustOpen() *wtx.Workspace {
	e.t.Helper()
	w, err := e.open()
	if err != nil {
		e.t.Fatalf("open %s: %v", e.ws, err)
	}
	e.t.Cleanup(func() { w.Close() })
	e.w = w
	return w
}

// begin opens a copy-backend stage and returns it with its view directory.
func (e *env) begin() (*wtx.Stage, string) {
	e.t.Helper()
	if e.w == nil {
		e.mustOpen()
	}
	s, err := e.w.Begin(e.ctx, wtx.BeginOptions{Backend: "copy"})
	if err != nil {
		e.t.Fatalf("begin: %v", err)
	}
	return s, filepath.Join(e.state, "stages", s.ID(), "view")
}

func (e *env) snap() string           { e.t.Helper(); return wtxtest.MustSnapshot(e.t, e.ws) }
func (e *env) canarySnap() string     { e.t.Helper(); return wtxtest.MustSnapshot(e.t, e.canary) }
func (e *env) wsPath(p string) string { return filepath.Join(e.ws, filepath.FromSlash(p)) }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// codeOf returns the wtx error code of err ("" for nil).
func codeOf(err error) string {
	if err == nil {
		return ""
	}
	return wtx.AsError(err).Code
}
