package mcpserve_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// session starts 'wtx mcp' on a new workspace as a subprocess and connects
// the SDK's client to it.
func session(t *testing.T, files map[string]string) (*mcp.ClientSession, string) {
	t.Helper()
	return sessionWith(t, files)
}

// sessionWith is session with flags for `wtx mcp`.
func sessionWith(t *testing.T, files map[string]string, flags ...string) (*mcp.ClientSession, string) {
	t.Helper()
	bin := wtxtest.Binary(t, false)
	root := t.TempDir()
	ws, state := filepath.Join(root, "ws"), filepath.Join(root, "state")
	for p, c := range files {
		full := filepath.Join(ws, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, append([]string{"-C", ws, "mcp"}, flags...)...)
	cmd.Env = append(os.Environ(), "WTX_STATE_DIR="+state)
	cmd.Stderr = os.Stderr
	ctx, cancel := context.WithTimeout(context.Background(), wtxtest.Patience(t))
	t.Cleanup(cancel)
	client := mcp.NewClient(&mcp.Implementation{Name: "wtx-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, ws
}

// call calls a tool and decodes its structured result into out; it returns
// the error text when the tool reports an error.
func call(t *testing.T, cs *mcp.ClientSession, name string, args any, out any) (errText string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", name, err)
	}
	if res.IsError {
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String()
	}
	if out != nil {
		data, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s: decode %s: %v", name, data, err)
		}
	}
	return ""
}

func TestMCPRoundTrip(t *testing.T) {
	cs, ws := session(t, map[string]string{"src/a.go": "package a\n\nfunc Old() {}\n"})
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"begin": true, "read": true, "write": true, "edit": true, "rm": true, "status": true, "diff": true, "apply": true, "drop": true, "run": true}
	for _, tool := range tools.Tools {
		if want[tool.Name] && tool.InputSchema == nil {
			t.Errorf("tool %s has no input schema", tool.Name)
		}
		delete(want, tool.Name)
	}
	if len(want) > 0 {
		t.Fatalf("tools missing: %v", want)
	}

	var begin struct{ Tx string }
	if e := call(t, cs, "begin", map[string]any{}, &begin); e != "" || !strings.HasPrefix(begin.Tx, "tx-") {
		t.Fatalf("begin: %q %+v", e, begin)
	}
	var edit struct {
		TxOp   int `json:"tx_op"`
		Digest string
	}
	if e := call(t, cs, "edit", map[string]any{"tx": begin.Tx, "path": "src/a.go", "old": "func Old()", "new": "func New()"}, &edit); e != "" {
		t.Fatalf("edit: %s", e)
	}
	if edit.TxOp != 1 {
		t.Fatalf("edit is op %d, want 1", edit.TxOp)
	}
	var read struct {
		Content string
		Digest  string
	}
	if e := call(t, cs, "read", map[string]any{"tx": begin.Tx, "path": "src/a.go"}, &read); e != "" {
		t.Fatalf("read: %s", e)
	}
	if !strings.Contains(read.Content, "func New()") || read.Digest != edit.Digest {
		t.Fatalf("read sees %q (%s), want the staged edit (%s)", read.Content, read.Digest, edit.Digest)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "src/a.go")); strings.Contains(string(data), "New") {
		t.Fatal("the workspace changed before apply")
	}
	var diff struct {
		Diff            string
		ChangesetDigest string `json:"changeset_digest"`
	}
	if e := call(t, cs, "diff", map[string]any{"tx": begin.Tx}, &diff); e != "" || !strings.Contains(diff.Diff, "+func New() {}") {
		t.Fatalf("diff: %s %q", e, diff.Diff)
	}
	var apply struct {
		OpID string `json:"op_id"`
	}
	if e := call(t, cs, "apply", map[string]any{"tx": begin.Tx, "expect": diff.ChangesetDigest}, &apply); e != "" || apply.OpID == "" {
		t.Fatalf("apply: %s %+v", e, apply)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "src/a.go")); string(data) != "package a\n\nfunc New() {}\n" {
		t.Fatalf("workspace after apply: %q", data)
	}
}

// TestMCPStaleReadRefused runs on a server started with --allow-approve,
// whose agent may ignore stale reads: every repair is then a tool call.
// (On a default server that repair is a person's: TestT_003_MCPSettings.)
func TestMCPStaleReadRefused(t *testing.T) {
	cs, ws := sessionWith(t, map[string]string{"spec.md": "limit is 10\n", "impl.go": "const limit = 10\n"}, "--allow-approve")
	var begin struct{ Tx string }
	call(t, cs, "begin", map[string]any{}, &begin)
	if e := call(t, cs, "read", map[string]any{"tx": begin.Tx, "path": "spec.md"}, nil); e != "" {
		t.Fatal(e)
	}
	if e := call(t, cs, "edit", map[string]any{"tx": begin.Tx, "path": "impl.go", "old": "10", "new": "20"}, nil); e != "" {
		t.Fatal(e)
	}
	// Someone changes what the agent based its edit on.
	if err := os.WriteFile(filepath.Join(ws, "spec.md"), []byte("limit is 30\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := call(t, cs, "apply", map[string]any{"tx": begin.Tx}, nil)
	var answer struct {
		Error struct {
			Code    string
			Message string
			Repairs []struct {
				Action, Command, Tool string
				Arguments             struct {
					Tx, Path         string
					IgnoreStaleReads bool `json:"ignore_stale_reads"`
				}
			}
			Conflicts []struct{ Path, Kind string }
		}
	}
	if err := json.Unmarshal([]byte(e), &answer); err != nil {
		t.Fatalf("apply should refuse with a JSON error, got %q", e)
	}
	if answer.Error.Code != "refusal.stale-read" || len(answer.Error.Conflicts) != 1 || answer.Error.Conflicts[0].Path != "spec.md" {
		t.Fatalf("apply answered %+v, want refusal.stale-read on spec.md", answer.Error)
	}
	// Repairs are tool calls, in the tools' own terms: re-read spec.md,
	// or apply with ignore_stale_reads; no command lines, no flags.
	rs := answer.Error.Repairs
	if len(rs) == 0 || rs[0].Tool != "read" || rs[0].Arguments.Tx != begin.Tx || rs[0].Arguments.Path != "spec.md" {
		t.Fatalf("the first repair should be a read tool call on spec.md: %+v", rs)
	}
	for _, r := range rs {
		if r.Command != "" || r.Tool == "" || r.Action == "rebase" {
			t.Errorf("repair %+v: want a tool call and no command line (and no rebase: nothing drifted, so it was not tried)", r)
		}
		if r.Tool == "apply" && !r.Arguments.IgnoreStaleReads {
			t.Errorf("apply repair without ignore_stale_reads: %+v", r)
		}
	}
	if strings.Contains(e, "--") || strings.Contains(e, "'wtx ") {
		t.Errorf("the error names a flag or a command line: %s", e)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "impl.go")); string(data) != "const limit = 10\n" {
		t.Fatalf("a refused apply changed the workspace: %q", data)
	}
	// Reading again refreshes the read set; then the apply lands.
	call(t, cs, "read", map[string]any{"tx": begin.Tx, "path": "spec.md"}, nil)
	if e := call(t, cs, "apply", map[string]any{"tx": begin.Tx}, nil); e != "" {
		t.Fatalf("apply after re-read: %s", e)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "impl.go")); string(data) != "const limit = 20\n" {
		t.Fatalf("workspace after apply: %q", data)
	}
}
