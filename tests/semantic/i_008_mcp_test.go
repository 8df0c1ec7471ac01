package semantic

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// I-008 over MCP: the stage's exclude selectors hold for every tool, as for
// the command line: per-file tools refuse excluded paths (refusal.boundary),
// a command's writes under them are never part of the change set, and
// apply never writes them.

func TestI008MCPExcludeHolds(t *testing.T) {
	t.Parallel()
	bin := wtxtest.Binary(t, false)
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	ws, state := mcpWorkspace(t, map[string]string{"keep.txt": "keep\n", "old.key": "k\n", "s\xffold": "s\n"})
	s := startMCP(t, bin, ws, state, nil)
	tx := s.beginStage(map[string]any{"exclude": []string{"*.key"}})
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"read", map[string]any{"tx": tx, "path": "old.key"}},
		{"write", map[string]any{"tx": tx, "path": "a.key", "content": "new\n"}},
		{"write", map[string]any{"tx": tx, "path_b64": b64("x\xff.key"), "content": "new\n"}},
		{"edit", map[string]any{"tx": tx, "path": "old.key", "old": "k", "new": "j"}},
		{"rm", map[string]any{"tx": tx, "path": "old.key"}},
	} {
		if r := s.call(c.tool, c.args); r.errorCode() != "refusal.boundary" {
			t.Fatalf("%s %v under --exclude: want refusal.boundary, got %s", c.tool, c.args, r.text())
		}
	}
	var run struct{ Changes []struct{ Path string } }
	s.call("run", map[string]any{"tx": tx, "argv": []string{"sh", "-c", "echo x > b.key; echo y > keep.txt"}}).decode(t, &run)
	if len(run.Changes) != 1 || run.Changes[0].Path != "keep.txt" {
		t.Fatalf("the run's change set should hold keep.txt only: %+v", run.Changes)
	}
	if r := s.call("apply", map[string]any{"tx": tx}); r.IsError {
		t.Fatalf("apply: %s", r.text())
	}
	for p, want := range map[string]string{"keep.txt": "y\n", "old.key": "k\n"} {
		if data, _ := os.ReadFile(filepath.Join(ws, p)); string(data) != want {
			t.Errorf("%s after apply: %q, want %q", p, data, want)
		}
	}
	for _, p := range []string{"a.key", "b.key", "x\xff.key"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Errorf("excluded %q reached the workspace", p)
		}
	}

	// A selector in its byte-safe form holds for a byte-safe path.
	tx2 := s.beginStage(map[string]any{"exclude_b64": []string{b64("s\xff*")}})
	if r := s.call("read", map[string]any{"tx": tx2, "path_b64": b64("s\xffold")}); r.errorCode() != "refusal.boundary" {
		t.Fatalf("read under an exclude_b64 selector: %s", r.text())
	}
	if r := s.call("read", map[string]any{"tx": tx2, "path": "keep.txt"}); r.IsError {
		t.Fatalf("read outside the selector: %s", r.text())
	}

	// Negative control: with the library's check off, the same write is
	// taken, which the refusal check above would catch.
	ws2, state2 := mcpWorkspace(t, nil)
	c := startMCP(t, wtxtest.Binary(t, true), ws2, state2, []string{"WTX_DISABLE=exclude"})
	tx3 := c.beginStage(map[string]any{"exclude": []string{"*.key"}})
	if r := c.call("write", map[string]any{"tx": tx3, "path": "a.key", "content": "new\n"}); r.IsError {
		t.Fatalf("control: with the check off the write should be taken: %s", r.text())
	}
}
