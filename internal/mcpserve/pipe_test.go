package mcpserve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// pipedSession writes every request at once to `wtx mcp`, closes its input
// and returns the ids the server answered before it exited.
func pipedSession(t *testing.T, env ...string) map[float64]map[string]any {
	t.Helper()
	bin := wtxtest.Binary(t, len(env) > 0) // switches need the failpoint build
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reqs := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"begin","arguments":{}}}`,
		// A request the client cancels needs no answer and must not
		// keep the server waiting for one.
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"run","arguments":{"argv":["sh","-c","sleep 30"]}}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"run","arguments":{"argv":["sh","-c","sleep 0.3; echo hi > b.txt"]}}}`,
		// The end of the input is also a client's shutdown: a call still
		// running after the grace period is stopped, and answers so.
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"run","arguments":{"argv":["sh","-c","sleep 300"]}}}`,
	}, "\n") + "\n"
	cmd := exec.Command(bin, "-C", ws, "mcp")
	cmd.Env = append(append(os.Environ(), "WTX_STATE_DIR="+filepath.Join(root, "state")), env...)
	cmd.Stdin = strings.NewReader(reqs)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("wtx mcp: %v", err)
	}
	if took := time.Since(start); took > 60*time.Second {
		t.Fatalf("wtx mcp took %v to end after its input ended", took)
	}
	got := map[float64]map[string]any{}
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not JSON: %q", sc.Text())
		}
		if id, ok := m["id"].(float64); ok {
			got[id] = m
		}
	}
	return got
}

// Scripts and simple hosts write their requests and close their end: every
// request read before the end of the input is answered before the server
// exits, and a cancelled one does not hold it up.
func TestMCPPipedSessionAnswersEveryRequest(t *testing.T) {
	got := pipedSession(t)
	for _, id := range []float64{1, 2, 3, 5, 6} {
		r, ok := got[id]
		if !ok {
			t.Fatalf("request %v was not answered; answers: %v", id, got)
		}
		if r["error"] != nil {
			t.Fatalf("request %v answered with an error: %v", id, r)
		}
	}
	res, _ := got[5]["result"].(map[string]any)
	if res["isError"] == true || !strings.Contains(string(mustJSON(t, res)), "b.txt") {
		t.Fatalf("the run's answer does not report its change: %v", res)
	}
	stopped, _ := got[6]["result"].(map[string]any)
	if !strings.Contains(string(mustJSON(t, stopped)), `"signal"`) {
		t.Fatalf("the run stopped at the end of the input does not say it was stopped: %v", stopped)
	}
}

func TestMCPPipedSessionNegativeControl(t *testing.T) {
	got := pipedSession(t, "WTX_DISABLE=mcp-drain")
	if _, ok := got[5]; ok {
		t.Fatal("with the drain switched off the run was still answered: the test cannot see the loss it guards against")
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
