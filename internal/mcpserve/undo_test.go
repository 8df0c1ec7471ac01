package mcpserve_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestMCPUndoSelectsAndRepairs: the undo tool takes paths and exclude like
// the command line's undo; a refusal because a path changed outside wtx
// offers, as a tool call, the undo that leaves that path out, and that call
// takes back the rest. A selection that selects nothing is an error.
func TestMCPUndoSelectsAndRepairs(t *testing.T) {
	cs, ws := session(t, map[string]string{"a.txt": "a\n", "c.txt": "c\n", "d.txt": "d\n"})
	var begin struct{ Tx string }
	call(t, cs, "begin", map[string]any{}, &begin)
	for _, p := range []string{"a.txt", "c.txt", "d.txt"} {
		if msg := call(t, cs, "write", map[string]any{"tx": begin.Tx, "path": p, "content": p + " new\n"}, nil); msg != "" {
			t.Fatal(msg)
		}
	}
	var ap struct {
		OpID *string `json:"op_id"`
	}
	if msg := call(t, cs, "apply", map[string]any{"tx": begin.Tx}, &ap); msg != "" || ap.OpID == nil {
		t.Fatalf("apply: %s", msg)
	}
	op := *ap.OpID
	read := func(p string) string {
		data, _ := os.ReadFile(filepath.Join(ws, p))
		return string(data)
	}

	// paths: only d.txt comes back.
	if msg := call(t, cs, "undo", map[string]any{"op": op, "paths": []string{"d.txt"}}, nil); msg != "" {
		t.Fatalf("undo with paths: %s", msg)
	}
	if read("d.txt") != "d\n" || read("c.txt") != "c.txt new\n" {
		t.Fatalf("after undo of d.txt: d=%q c=%q", read("d.txt"), read("c.txt"))
	}
	e := inToolTerms(t, call(t, cs, "undo", map[string]any{"op": op, "paths": []string{"c.txt"}, "exclude": []string{"c.txt"}}, nil))
	if e.Error.Code != "not-found.path" {
		t.Fatalf("a selection of nothing: %+v", e)
	}

	// a.txt changed outside: refused, and the repair is an undo call
	// leaving a.txt out.
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("zz\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	raw := call(t, cs, "undo", map[string]any{"op": op}, nil)
	e = inToolTerms(t, raw)
	if e.Error.Code != "refusal.target-changed" {
		t.Fatalf("undo over a changed path: %s", raw)
	}
	var full struct {
		Error struct {
			Repairs []struct {
				Tool      string
				Arguments map[string]any
			}
		}
	}
	if err := json.Unmarshal([]byte(raw), &full); err != nil {
		t.Fatal(err)
	}
	var args map[string]any
	for _, r := range full.Error.Repairs {
		if r.Tool == "undo" && r.Arguments["exclude"] != nil {
			args = r.Arguments
		}
	}
	if args == nil || args["op"] != op {
		t.Fatalf("no undo repair leaving the changed path out: %s", raw)
	}
	if msg := call(t, cs, "undo", args, nil); msg != "" {
		t.Fatalf("the offered undo %v: %s", args, msg)
	}
	if read("c.txt") != "c\n" || read("a.txt") != "zz\n" {
		t.Fatalf("after the offered undo: a=%q c=%q", read("a.txt"), read("c.txt"))
	}
}
