package semantic

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// TestW004MCPEmptyAtRefused: the MCP server's begin with "at" given but
// empty is refused as usage.invalid, as the command line's empty --at, and
// opens no stage; "at" left out opens an ordinary stage.
func TestW004MCPEmptyAtRefused(t *testing.T) {
	t.Parallel()
	bin := wtxtest.Binary(t, false)
	ws, state := mcpWorkspace(t, map[string]string{"a.txt": "a\n"})
	s := startMCP(t, bin, ws, state, nil)
	r := s.rawCall("begin", []byte(`{"at":""}`))
	if !r.IsError || r.errorCode() != "usage.invalid" || !strings.Contains(r.text(), "log tool") || strings.Contains(r.text(), "--at") {
		t.Fatalf(`begin {"at":""}: error=%v code %q, %s; want usage.invalid in the tool's terms`, r.IsError, r.errorCode(), r.text())
	}
	stages := func() int {
		cmd := exec.Command(bin, "-C", ws, "list", "--json")
		cmd.Env = append(os.Environ(), "WTX_STATE_DIR="+state)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		return strings.Count(string(out), `"tx":"tx-`)
	}
	if n := stages(); n != 0 {
		t.Fatalf(`begin {"at":""} opened %d stage(s)`, n)
	}
	if tx := s.beginStage(map[string]any{}); tx == "" {
		t.Fatal("begin without at opened no stage")
	}
	if n := stages(); n != 1 {
		t.Fatalf("begin without at: %d stages, want 1", n)
	}
}
