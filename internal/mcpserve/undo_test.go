package mcpserve_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// applyNew writes "PATH new\n" to each path in a new stage, applies it and
// returns the op's id.
func applyNew(t *testing.T, cs *mcp.ClientSession, paths ...string) string {
	t.Helper()
	var begin struct{ Tx string }
	call(t, cs, "begin", map[string]any{}, &begin)
	for _, p := range paths {
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
	return *ap.OpID
}

// TestMCPUndoSelectsAndRepairs: the undo tool takes paths and exclude like
// the command line's undo; a refusal because a path changed outside wtx
// offers, as a tool call, the undo that leaves that path out, and that call
// takes back the rest. A selection that selects nothing is an error.
func TestMCPUndoSelectsAndRepairs(t *testing.T) {
	cs, ws := session(t, map[string]string{"a.txt": "a\n", "c.txt": "c\n", "d.txt": "d\n"})
	op := applyNew(t, cs, "a.txt", "c.txt", "d.txt")
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

// TestMCPUndoOfNoOpWalksBack: an undo that names no op takes back the
// newest apply not undone yet, so a second one takes back the apply before
// it, and a third, with none left, is not-found.op; whether the server
// checks protected paths first (the default) or not (--allow-approve).
func TestMCPUndoOfNoOpWalksBack(t *testing.T) {
	for _, server := range []struct {
		name  string
		flags []string
	}{{"protects", nil}, {"approves", []string{"--allow-approve"}}} {
		t.Run(server.name, func(t *testing.T) {
			cs, ws := sessionWith(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"}, server.flags...)
			ops := []string{applyNew(t, cs, "a.txt"), applyNew(t, cs, "b.txt")}
			read := func(p string) string {
				data, _ := os.ReadFile(filepath.Join(ws, p))
				return string(data)
			}
			for i, want := range []struct{ op, a, b string }{
				{ops[1], "a.txt new\n", "b\n"},
				{ops[0], "a\n", "b\n"},
			} {
				var un struct{ Undoes string }
				if msg := call(t, cs, "undo", map[string]any{}, &un); msg != "" || un.Undoes != want.op {
					t.Fatalf("undo %d: %s, undoes %q, want %q", i+1, msg, un.Undoes, want.op)
				}
				if read("a.txt") != want.a || read("b.txt") != want.b {
					t.Fatalf("after undo %d: a=%q b=%q", i+1, read("a.txt"), read("b.txt"))
				}
			}
			if e := inToolTerms(t, call(t, cs, "undo", map[string]any{}, nil)); e.Error.Code != "not-found.op" {
				t.Fatalf("undo with no apply left: %+v", e)
			}
		})
	}
}
