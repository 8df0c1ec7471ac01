package mcpserve_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// toolErr is a tool's error answer.
type toolErr struct {
	Command string
	Error   struct {
		Code    string
		Message string
		Repairs []struct {
			Action, Detail, Command, Tool string
			Person                        bool
			Arguments                     struct {
				Tx      string
				Merge   bool
				Exclude []string
			}
		}
		Conflicts []struct{ Path, Kind, Detail string }
	}
}

var cliTerms = regexp.MustCompile(`(^|[^a-z0-9])--[a-z]|'wtx `)

// inToolTerms checks an error answer names no command-line flag or
// command outside a person's repair.
func inToolTerms(t *testing.T, raw string) toolErr {
	t.Helper()
	var e toolErr
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		t.Fatalf("not a JSON error: %q", raw)
	}
	texts := []string{e.Error.Message}
	for _, r := range e.Error.Repairs {
		texts = append(texts, r.Detail)
		if r.Command != "" && !r.Person {
			t.Errorf("repair %+v: a command line for an agent", r)
		}
		if r.Tool == "" && !r.Person && r.Action != "wait" {
			t.Errorf("repair %+v: neither a tool call nor a person's step", r)
		}
	}
	for _, c := range e.Error.Conflicts {
		texts = append(texts, c.Detail)
	}
	for _, s := range texts {
		if cliTerms.MatchString(s) {
			t.Errorf("an error names a command-line flag or command: %q (in %s)", s, raw)
		}
	}
	return e
}

func TestMCPContractTools(t *testing.T) {
	lines := "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n"
	cs, ws := session(t, map[string]string{"a.txt": "one\ntwo\nthree\n", "h.txt": lines})

	// The server reports the version 'wtx version' prints.
	out, err := exec.Command(wtxtest.Binary(t, false), "version", "--json").Output()
	var v struct{ Version string }
	if err != nil || json.Unmarshal(out, &v) != nil || v.Version == "" {
		t.Fatalf("wtx version --json: %q (%v)", out, err)
	}
	if got := cs.InitializeResult().ServerInfo.Version; got != v.Version {
		t.Fatalf("the MCP server reports version %q, wtx version %q", got, v.Version)
	}
	var begin struct{ Tx string }
	call(t, cs, "begin", map[string]any{}, &begin)
	tx := begin.Tx

	// Errors in the tools' terms: no --old, no 'wtx ...'.
	e := inToolTerms(t, call(t, cs, "edit", map[string]any{"tx": tx, "path": "a.txt", "old": "absent", "new": "x"}, nil))
	if e.Error.Code != "precondition.edit-no-match" {
		t.Fatalf("edit of absent text: %+v", e)
	}
	e = inToolTerms(t, call(t, cs, "status", map[string]any{"tx": "no-such"}, nil))
	if e.Error.Code != "not-found.stage" || !strings.Contains(e.Error.Message, "list tool") {
		t.Fatalf("an unknown stage: %+v", e)
	}

	// Write answers carry changes[] and strategy.
	var w struct {
		Strategy string
		Changes  []struct{ Path, Action string }
	}
	if msg := call(t, cs, "edit", map[string]any{"tx": tx, "path": "a.txt", "old": "one", "new": "ONE"}, &w); msg != "" {
		t.Fatal(msg)
	}
	if w.Strategy != "staged" || len(w.Changes) != 1 || w.Changes[0].Action != "modified" {
		t.Fatalf("edit's answer: %+v", w)
	}

	// A drift refusal offers the rebase tool, tried; it then works.
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\ntwo\nthree changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e = inToolTerms(t, call(t, cs, "apply", map[string]any{"tx": tx}, nil))
	if e.Error.Code != "refusal.target-changed" || len(e.Error.Repairs) == 0 || e.Error.Repairs[0].Tool != "rebase" || e.Error.Repairs[0].Arguments.Tx != tx {
		t.Fatalf("drift refusal: %+v", e.Error)
	}
	// a.txt is all the stage changes: leaving it out would apply nothing,
	// so no apply call with exclude is offered.
	for _, r := range e.Error.Repairs {
		if r.Tool == "apply" && len(r.Arguments.Exclude) > 0 {
			t.Errorf("drift refusal: an apply call that would apply nothing: %+v", r)
		}
	}
	var drift struct {
		Diff  string
		Drift []struct {
			Path  string
			Shown bool
		}
	}
	call(t, cs, "diff", map[string]any{"tx": tx, "drift": true}, &drift)
	if len(drift.Drift) != 1 || !drift.Drift[0].Shown || !strings.Contains(drift.Diff, "+three changed") {
		t.Fatalf("diff with drift: %+v", drift)
	}
	var rb struct{ Rebased []string }
	if msg := call(t, cs, "rebase", map[string]any{"tx": tx}, &rb); msg != "" || len(rb.Rebased) != 1 {
		t.Fatalf("rebase: %s %+v", msg, rb)
	}
	var ap struct {
		OpID    *string `json:"op_id"`
		Changes []struct{ Path string }
	}
	if msg := call(t, cs, "apply", map[string]any{"tx": tx}, &ap); msg != "" || ap.OpID == nil {
		t.Fatalf("apply after rebase: %s %+v", msg, ap)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(data) != "ONE\ntwo\nthree changed\n" {
		t.Fatalf("a.txt: %q", data)
	}

	// log, list, undo (the last op by default).
	var lg struct {
		Ops []struct {
			OpID string `json:"op_id"`
		}
	}
	call(t, cs, "log", map[string]any{}, &lg)
	if len(lg.Ops) != 1 || lg.Ops[0].OpID != *ap.OpID {
		t.Fatalf("log: %+v", lg)
	}
	var ls struct{ Stages []struct{ Tx, State string } }
	call(t, cs, "list", map[string]any{"settled": true}, &ls)
	if len(ls.Stages) != 1 || ls.Stages[0].State != "applied" {
		t.Fatalf("list: %+v", ls)
	}
	var un struct {
		Undoes string
		OpID   *string `json:"op_id"`
	}
	if msg := call(t, cs, "undo", map[string]any{}, &un); msg != "" || un.Undoes != *ap.OpID {
		t.Fatalf("undo: %s %+v", msg, un)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(data) != "one\ntwo\nthree changed\n" {
		t.Fatalf("a.txt after undo: %q", data)
	}

	// Hunk selection: two hunks, apply the second alone.
	call(t, cs, "begin", map[string]any{}, &begin)
	changed := strings.Replace(strings.Replace(lines, "1\n", "first\n", 1), "15\n", "last\n", 1)
	if msg := call(t, cs, "write", map[string]any{"tx": begin.Tx, "path": "h.txt", "content": changed}, nil); msg != "" {
		t.Fatal(msg)
	}
	var df struct{ Diff string }
	call(t, cs, "diff", map[string]any{"tx": begin.Tx, "number_hunks": true}, &df)
	if !strings.Contains(df.Diff, "hunk 2") {
		t.Fatalf("numbered diff: %s", df.Diff)
	}
	e = inToolTerms(t, call(t, cs, "apply_hunks", map[string]any{"tx": begin.Tx, "path": "h.txt", "hunks": []int{7}}, nil))
	if e.Error.Code != "usage.invalid" {
		t.Fatalf("hunk 7 of 2: %+v", e)
	}
	if msg := call(t, cs, "apply_hunks", map[string]any{"tx": begin.Tx, "path": "h.txt", "hunks": []int{2}}, nil); msg != "" {
		t.Fatal(msg)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "h.txt")); !strings.HasPrefix(string(data), "1\n") || !strings.HasSuffix(string(data), "last\n") {
		t.Fatalf("h.txt after hunk 2: %q", data)
	}
}
