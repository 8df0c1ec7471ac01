package mcpserve_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// Every tool says what a host may assume of it, so that hosts can let
// read-only tools through and warn before the ones that change the
// workspace or discard work.
func TestMCPToolAnnotations(t *testing.T) {
	cs, _ := sessionWith(t, map[string]string{"a.txt": "a\n"}, "--allow-approve")
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	readOnly := []string{"read", "status", "diff", "list", "log"}
	destructive := []string{"apply", "apply_hunks", "undo", "drop"}
	seen := 0
	for _, tool := range res.Tools {
		a := tool.Annotations
		if a == nil {
			t.Errorf("tool %s has no annotations", tool.Name)
			continue
		}
		seen++
		if got, want := a.ReadOnlyHint, slices.Contains(readOnly, tool.Name); got != want {
			t.Errorf("tool %s: readOnlyHint %v, want %v", tool.Name, got, want)
		}
		if a.DestructiveHint == nil || *a.DestructiveHint != slices.Contains(destructive, tool.Name) {
			if !a.ReadOnlyHint {
				t.Errorf("tool %s: destructiveHint %v, want %v", tool.Name, a.DestructiveHint, slices.Contains(destructive, tool.Name))
			}
		}
		if a.OpenWorldHint == nil || *a.OpenWorldHint != (tool.Name == "run") {
			t.Errorf("tool %s: openWorldHint %v", tool.Name, a.OpenWorldHint)
		}
	}
	if seen < 15 {
		t.Fatalf("%d tools annotated, want all 15", seen)
	}
}

// Input schemas say what a call needs: a required array is an array, not
// "array or null"; a path is required as path or path_b64.
func TestMCPInputSchemas(t *testing.T) {
	cs, _ := session(t, map[string]string{"a.txt": "a\n"})
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]map[string]any{}
	for _, tool := range res.Tools {
		data, err := json.Marshal(tool.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		schemas[tool.Name] = m
	}
	run := schemas["run"]
	argv := run["properties"].(map[string]any)["argv"].(map[string]any)
	if argv["type"] != "array" {
		t.Errorf("run.argv is typed %v (%v), want array", argv["type"], argv["types"])
	}
	if req, _ := run["required"].([]any); !slices.Contains(req, any("argv")) {
		t.Errorf("run does not require argv: %v", run["required"])
	}
	for _, name := range []string{"read", "write", "edit", "rm"} {
		alts, _ := schemas[name]["anyOf"].([]any)
		var got []string
		for _, a := range alts {
			r, _ := a.(map[string]any)["required"].([]any)
			for _, x := range r {
				got = append(got, x.(string))
			}
		}
		if !slices.Equal(got, []string{"path", "path_b64"}) {
			t.Errorf("%s: anyOf requires %v, want path or path_b64", name, got)
		}
	}
	for name, s := range schemas {
		props, _ := s["properties"].(map[string]any)
		for arg, p := range props {
			if ts, ok := p.(map[string]any)["type"].([]any); ok && slices.Contains(ts, any("null")) {
				t.Errorf("%s.%s may be null: %v", name, arg, ts)
			}
		}
	}
}

// A call whose arguments do not fit the schema is refused with the same
// JSON error object, and code, as every other refusal.
func TestMCPValidationErrorsAreErrorObjects(t *testing.T) {
	cs, _ := session(t, map[string]string{"a.txt": "a\n"})
	var begun struct{ Tx string }
	if e := call(t, cs, "begin", map[string]any{}, &begun); e != "" {
		t.Fatal(e)
	}
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"run", map[string]any{}},
		{"run", map[string]any{"argv": "true"}},
		{"run", map[string]any{"argv": nil}},
		{"read", map[string]any{"tx": begun.Tx}},
		{"read", map[string]any{"tx": begun.Tx, "path": 7}},
		{"status", map[string]any{"tx": begun.Tx, "verbose": true}},
	} {
		raw := call(t, cs, c.tool, c.args, nil)
		if raw == "" {
			t.Errorf("%s %v: accepted", c.tool, c.args)
			continue
		}
		e := inToolTerms(t, raw)
		if e.Error.Code != "usage.invalid" || e.Error.Message == "" {
			t.Errorf("%s %v: %q, want a usage.invalid error object", c.tool, c.args, raw)
		}
	}
}

// diff's answer carries the diff once more as a plain text block, after
// the JSON one, so a reader need not unescape it.
func TestMCPDiffPlainBlock(t *testing.T) {
	cs, _ := session(t, map[string]string{"a.txt": "a\n"})
	var begun struct{ Tx string }
	if e := call(t, cs, "begin", map[string]any{}, &begun); e != "" {
		t.Fatal(e)
	}
	if e := call(t, cs, "write", map[string]any{"tx": begun.Tx, "path": "a.txt", "content": "a\n\"quoted\"\tline\n"}, nil); e != "" {
		t.Fatal(e)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "diff", Arguments: map[string]any{"tx": begun.Tx}})
	if err != nil || res.IsError {
		t.Fatalf("diff: %v %v", err, res)
	}
	if len(res.Content) != 2 {
		t.Fatalf("diff answered %d content blocks, want the JSON and the plain diff", len(res.Content))
	}
	first, _ := res.Content[0].(*mcp.TextContent)
	plain, _ := res.Content[1].(*mcp.TextContent)
	var out struct{ Diff string }
	if first == nil || json.Unmarshal([]byte(first.Text), &out) != nil {
		t.Fatalf("the first block is not the JSON answer: %v", res.Content[0])
	}
	if plain == nil || plain.Text != out.Diff || !strings.Contains(plain.Text, "+\"quoted\"\tline\n") {
		t.Fatalf("the plain block %v is not the diff %q", plain, out.Diff)
	}
}

// A run whose call is cancelled is recorded as cancelled, with the signal
// that ended its command, not as done.
func TestMCPCancelledRunIsRecordedSo(t *testing.T) {
	cs, _ := session(t, map[string]string{"a.txt": "a\n"})
	var begun struct{ Tx string }
	if e := call(t, cs, "begin", map[string]any{}, &begun); e != "" {
		t.Fatal(e)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run", Arguments: map[string]any{"tx": begun.Tx, "argv": []string{"sh", "-c", "echo x > b.txt; exec sleep 60"}}})
		errc <- err
	}()
	// Wait until the command has written, then cancel the call.
	deadline := time.Now().Add(wtxtest.Patience(t))
	for {
		var st struct {
			TxOps []struct{ Status string } `json:"tx_ops"`
		}
		e := call(t, cs, "status", map[string]any{"tx": begun.Tx}, &st)
		if e == "" && len(st.TxOps) == 1 && st.TxOps[0].Status == "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run never started")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	cancel()
	<-errc
	for {
		var st struct {
			TxOps []struct{ Status, Signal string } `json:"tx_ops"`
		}
		if e := call(t, cs, "status", map[string]any{"tx": begun.Tx}, &st); e == "" && len(st.TxOps) == 1 && st.TxOps[0].Status != "running" {
			if st.TxOps[0].Status != "cancelled" || st.TxOps[0].Signal == "" {
				t.Fatalf("the cancelled run is recorded as %+v", st.TxOps[0])
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the cancelled run was never recorded as ended")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
