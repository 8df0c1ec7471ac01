package semantic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// L-005: agents propose, people approve. 'wtx mcp' never passes approval for
// protected paths unless started with --allow-approve; 'wtx mcp
// --propose-only' offers no tool that changes the workspace. The MCP run
// tool is bounded (timeout, cancellation, the client going away) and one bad
// request line does not end the session.

func toolNames(t *testing.T, s *mcpServer) []string {
	t.Helper()
	r := s.await(s.request("tools/list", map[string]any{}), wtxtest.Patience(t))
	if r.Error != nil {
		t.Fatalf("tools/list: %+v", r.Error)
	}
	var list struct{ Tools []struct{ Name string } }
	if err := json.Unmarshal(r.Result, &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	sort.Strings(names)
	return names
}

// workspaceChangers are the tools that change the workspace itself.
var workspaceChangers = map[string]bool{"apply": true, "drop": true, "undo": true, "drop-op": true, "rebase": true}

func changers(names []string) []string {
	var out []string
	for _, n := range names {
		if workspaceChangers[n] {
			out = append(out, n)
		}
	}
	return out
}

func TestL005ProposeOnlyOffersNoWorkspaceChange(t *testing.T) {
	t.Parallel()
	bin := wtxtest.Binary(t, false)
	ws, state := mcpWorkspace(t, map[string]string{"a.txt": "one\n"})

	// Negative control: a plain server offers apply and drop, so the check
	// below can see them.
	plain := startMCP(t, bin, ws, state, nil)
	if got := changers(toolNames(t, plain)); len(got) < 2 {
		t.Fatalf("control: a plain server offers %v; the check cannot see apply and drop", got)
	}

	s := startMCP(t, bin, ws, state, nil, "--propose-only")
	names := toolNames(t, s)
	if got := changers(names); len(got) > 0 {
		t.Fatalf("--propose-only offers %v (all tools: %v)", got, names)
	}
	for _, want := range []string{"begin", "read", "write", "edit", "rm", "run", "status", "diff"} {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+want+" ") {
			t.Errorf("--propose-only lacks %s (tools: %v)", want, names)
		}
	}
	// The agent still proposes: it stages a write and runs a command.
	tx := s.beginStage(map[string]any{})
	if r := s.call("write", map[string]any{"tx": tx, "path": "a.txt", "content": "two\n"}); r.IsError {
		t.Fatalf("write: %s", r.text())
	}
	if r := s.call("run", map[string]any{"tx": tx, "argv": []string{"sh", "-c", "echo made > b.txt"}}); r.IsError {
		t.Fatalf("run: %s", r.text())
	}
	// A call of a tool that is not offered is refused and changes nothing.
	if r := s.await(s.callAsync("apply", map[string]any{"tx": tx, "approve": true}), wtxtest.Patience(t)); r.Error == nil && !bytes.Contains(r.Result, []byte(`"isError":true`)) {
		t.Fatalf("apply on a --propose-only server answered %s", r.Result)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(data) != "one\n" {
		t.Fatalf("the workspace changed: a.txt = %q", data)
	}
	if _, err := os.Lstat(filepath.Join(ws, "b.txt")); err == nil {
		t.Fatal("the workspace changed: b.txt exists")
	}
	// A person lands the proposal.
	if r := runWtx(t, ws, state, "apply", tx); r.code != 0 {
		t.Fatalf("wtx apply: %d %s", r.code, r.stderr)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "b.txt")); string(data) != "made\n" {
		t.Fatalf("after a person's apply b.txt = %q", data)
	}
}

func TestL005ApproveNeedsAllowApprove(t *testing.T) {
	t.Parallel()
	bin := wtxtest.Binary(t, false)
	ws, state := mcpWorkspace(t, map[string]string{"conf/secret.env": "KEY=1\n", "notes.txt": "n\n"})
	stageProtected := func(s *mcpServer) string {
		tx := s.beginStage(map[string]any{"protect": []string{"conf"}})
		if r := s.call("write", map[string]any{"tx": tx, "path": "conf/secret.env", "content": "KEY=agent\n"}); r.IsError {
			t.Fatalf("write: %s", r.text())
		}
		return tx
	}
	untouched := func(when string) {
		t.Helper()
		if data, _ := os.ReadFile(filepath.Join(ws, "conf/secret.env")); string(data) != "KEY=1\n" {
			t.Fatalf("%s: the protected file was written: %q", when, data)
		}
	}

	s := startMCP(t, bin, ws, state, nil)
	tx := stageProtected(s)
	for _, approve := range []bool{true, false} {
		r := s.call("apply", map[string]any{"tx": tx, "approve": approve})
		if r.errorCode() != "refusal.protected" {
			t.Fatalf("apply approve=%v without --allow-approve: want refusal.protected, got %s", approve, r.text())
		}
		var e struct {
			Error struct {
				Message   string
				ExitCode  int `json:"exit_code"`
				Repairs   []struct{ Command string }
				Conflicts []struct{ Path, Kind string }
			}
		}
		if err := json.Unmarshal([]byte(r.text()), &e); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(e.Error.Message, "person") || strings.Contains(e.Error.Message, "--") {
			t.Errorf("message should say a person approves, without command-line flags: %q", e.Error.Message)
		}
		if e.Error.ExitCode != 2 || len(e.Error.Conflicts) != 1 || e.Error.Conflicts[0].Path != "conf/secret.env" {
			t.Errorf("refusal: %+v", e.Error)
		}
		if len(e.Error.Repairs) == 0 || !strings.Contains(e.Error.Repairs[len(e.Error.Repairs)-1].Command, "wtx apply "+tx+" --approve") {
			t.Errorf("repairs should name the person's command: %+v", e.Error.Repairs)
		}
		untouched(fmt.Sprintf("approve=%v", approve))
	}

	// Negative control: with the gate switched off, the agent's approve
	// lands the protected file, which the check above would catch.
	fp := wtxtest.Binary(t, true)
	ws2, state2 := mcpWorkspace(t, map[string]string{"conf/secret.env": "KEY=1\n"})
	c := startMCP(t, fp, ws2, state2, []string{"WTX_DISABLE=authority"})
	tx2 := c.beginStage(map[string]any{"protect": []string{"conf"}})
	c.call("write", map[string]any{"tx": tx2, "path": "conf/secret.env", "content": "KEY=agent\n"})
	if r := c.call("apply", map[string]any{"tx": tx2, "approve": true}); r.IsError {
		t.Fatalf("control: with the gate off the apply should land: %s", r.text())
	}
	if data, _ := os.ReadFile(filepath.Join(ws2, "conf/secret.env")); string(data) != "KEY=agent\n" {
		t.Fatalf("control: with the gate off the protected file should be written, is %q", data)
	}

	// Started with --allow-approve, the same request is honoured.
	a := startMCP(t, bin, ws, state, nil, "--allow-approve")
	if r := a.call("apply", map[string]any{"tx": tx}); r.errorCode() != "refusal.protected" {
		t.Fatalf("apply without approve under --allow-approve: %s", r.text())
	}
	untouched("apply without approve under --allow-approve")
	if r := a.call("apply", map[string]any{"tx": tx, "approve": true}); r.IsError {
		t.Fatalf("apply approve=true with --allow-approve: %s", r.text())
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "conf/secret.env")); string(data) != "KEY=agent\n" {
		t.Fatalf("with --allow-approve the approved file is %q", data)
	}

	if r := runWtx(t, ws, state, "mcp", "--allow-approve", "--propose-only"); r.code != 1 || !strings.Contains(r.stderr, "exclude each other") {
		t.Fatalf("--allow-approve with --propose-only: exit %d (%s), want 1, a usage error", r.code, r.stderr)
	}
}

// marker makes a command line no other process has: a sleep of 300 s and a
// fraction unique to the test. Processes still carrying it when the test
// ends (it failed) are killed.
func marker(t *testing.T) string {
	m := fmt.Sprintf("300.%09d", time.Now().UnixNano()%1e9)
	t.Cleanup(func() {
		for _, pid := range processesWith(t, m) {
			if n, err := strconv.Atoi(pid); err == nil {
				_ = syscall.Kill(n, syscall.SIGKILL) // a leftover of a failed test; it may have ended meanwhile
			}
		}
	})
	return m
}

// leftBehind is a command whose container holds more than its first
// process: a background sleep and a foreground one.
func leftBehind(m string) []string {
	return []string{"sh", "-c", "sleep " + m + " & sleep " + m + "; wait"}
}

func TestL005RunCancelStopsContainer(t *testing.T) {
	t.Parallel()
	bin := wtxtest.Binary(t, false)
	ws, state := mcpWorkspace(t, map[string]string{"a.txt": "a\n"})
	s := startMCP(t, bin, ws, state, nil)
	m := marker(t)
	id := s.callAsync("run", map[string]any{"argv": leftBehind(m)})
	// Negative control for the /proc check: it sees the command's processes
	// while they run.
	if !waitProcesses(t, m, wtxtest.Patience(t), func(n int) bool { return n >= 2 }) {
		t.Fatalf("the command's processes never showed in /proc; stderr:\n%s", s.stderr.String())
	}
	s.notify("notifications/cancelled", map[string]any{"requestId": id, "reason": "test"})
	if !waitProcesses(t, m, wtxtest.Patience(t), func(n int) bool { return n == 0 }) {
		t.Fatalf("processes %v still run 5s after the call was cancelled", processesWith(t, m))
	}
	// The cancelled call is still answered, with what was staged; the stage
	// is free again and the session goes on.
	var out struct{ Tx string }
	s.result(id, wtxtest.Patience(t)).decode(t, &out)
	if r := s.call("run", map[string]any{"tx": out.Tx, "argv": []string{"true"}}); r.IsError {
		t.Fatalf("a run in the stage after the cancelled one: %s", r.text())
	}
	if !s.ping() {
		t.Fatal("the server stopped answering after a cancelled run")
	}
}

func TestL005RunTimeout(t *testing.T) {
	t.Parallel()
	bin := wtxtest.Binary(t, false)
	ws, state := mcpWorkspace(t, map[string]string{"a.txt": "a\n"})
	s := startMCP(t, bin, ws, state, nil)

	// A command that ends in time is not marked (control for timed_out).
	var quick struct {
		ExitCode int  `json:"exit_code"`
		TimedOut bool `json:"timed_out"`
	}
	s.call("run", map[string]any{"argv": []string{"true"}, "timeout": 20}).decode(t, &quick)
	if quick.TimedOut || quick.ExitCode != 0 {
		t.Fatalf("a quick command: %+v", quick)
	}

	m := marker(t)
	start := time.Now()
	id := s.callAsync("run", map[string]any{"argv": []string{"sh", "-c", "echo partial > p.txt; sleep " + m + " & sleep " + m + "; wait"}, "timeout": 1})
	r := s.result(id, wtxtest.Patience(t))
	took := time.Since(start)
	var out struct {
		Tx       string
		ExitCode int  `json:"exit_code"`
		TimedOut bool `json:"timed_out"`
		Changes  []struct{ Path string }
	}
	r.decode(t, &out)
	if !out.TimedOut || out.ExitCode == 0 {
		t.Fatalf("run past its timeout: %+v", out)
	}
	if took >= 300*time.Second { // the command's own sleep: only a timeout ends it sooner
		t.Errorf("a 1s timeout took %v", took)
	}
	if n := processesWith(t, m); len(n) > 0 && !waitProcesses(t, m, wtxtest.Patience(t), func(n int) bool { return n == 0 }) {
		t.Fatalf("processes %v outlived the timeout", processesWith(t, m))
	}
	if len(out.Changes) != 1 || out.Changes[0].Path != "p.txt" {
		t.Errorf("what the command wrote before the timeout stays staged: %+v", out.Changes)
	}
	if r := s.call("run", map[string]any{"argv": []string{"true"}, "timeout": 1e6}); r.errorCode() != "usage.invalid" {
		t.Fatalf("a timeout over the maximum: %s", r.text())
	}
}

func TestL005StdinCloseEndsRuns(t *testing.T) {
	t.Parallel()
	bin := wtxtest.Binary(t, false)
	ws, state := mcpWorkspace(t, map[string]string{"a.txt": "a\n"})
	s := startMCP(t, bin, ws, state, nil)
	m := marker(t)
	s.callAsync("run", map[string]any{"argv": leftBehind(m)})
	if !waitProcesses(t, m, wtxtest.Patience(t), func(n int) bool { return n >= 2 }) {
		t.Fatalf("the command's processes never showed in /proc; stderr:\n%s", s.stderr.String())
	}
	// Negative control: the server is alive with its run in flight.
	if s.waitExit(300 * time.Millisecond) {
		t.Fatal("the server ended before its input was closed")
	}
	s.in.Close()
	if !s.waitExit(wtxtest.Patience(t)) {
		t.Fatalf("the server still runs 5s after its input closed; stderr:\n%s", s.stderr.String())
	}
	if !waitProcesses(t, m, wtxtest.Patience(t), func(n int) bool { return n == 0 }) {
		t.Fatalf("processes %v outlived the server", processesWith(t, m))
	}
}

func TestL005MalformedRequestKeepsServing(t *testing.T) {
	t.Parallel()
	bin := wtxtest.Binary(t, false)
	ws, state := mcpWorkspace(t, map[string]string{"a.txt": "a\n"})
	s := startMCP(t, bin, ws, state, nil)
	for _, c := range []struct {
		line string
		code int
		id   string
	}{
		{"this is not json", -32700, "null"},
		{`{"jsonrpc":"2.0","id":41,"method":"tools/list"`, -32700, "null"},
		{`{"jsonrpc":"2.0","id":42,"method":7}`, -32600, "42"},
		{`[]`, -32600, "null"},
	} {
		s.sendLine([]byte(c.line))
		r, ok := s.next(wtxtest.Patience(t))
		if !ok {
			t.Fatalf("no reply to %q; stderr:\n%s", c.line, s.stderr.String())
		}
		if r.Error == nil || r.Error.Code != c.code || string(r.ID) != c.id {
			t.Fatalf("reply to %q: id %s error %+v, want id %s code %d", c.line, r.ID, r.Error, c.id, c.code)
		}
		if !s.ping() {
			t.Fatalf("the server stopped answering after %q", c.line)
		}
	}
	if r := s.call("write", map[string]any{"tx": s.beginStage(map[string]any{}), "path": "b.txt", "content": "b\n"}); r.IsError {
		t.Fatalf("a tool call after bad lines: %s", r.text())
	}

	// Negative control: with the server's own framing off, the same line
	// ends the session unanswered.
	c := startMCP(t, wtxtest.Binary(t, true), ws, state, []string{"WTX_DISABLE=line-framing"})
	c.sendLine([]byte("this is not json"))
	if r, ok := c.next(wtxtest.Patience(t)); ok && r.Error != nil && r.Error.Code == -32700 {
		t.Fatal("control: the SDK's transport answered a parse error; this test no longer tells the framing apart")
	}
	if !c.waitExit(wtxtest.Patience(t)) {
		t.Fatal("control: the SDK's transport kept serving after a bad line")
	}
}

func TestL005OversizedRequestKeepsServing(t *testing.T) {
	t.Parallel()
	bin := wtxtest.Binary(t, false)
	ws, state := mcpWorkspace(t, map[string]string{"a.txt": "a\n"})
	big := func(s *mcpServer, tx string) []byte {
		s.nextID++
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"write","arguments":{"tx":%q,"path":"big.txt","content":"%s"}}}`,
			s.nextID, tx, strings.Repeat("x", 16<<20))
	}
	s := startMCP(t, bin, ws, state, nil)
	tx := s.beginStage(map[string]any{})
	line := big(s, tx)
	s.sendLine(line)
	r := s.await(s.nextID, wtxtest.Patience(t))
	if r.Error == nil || r.Error.Code != -32600 {
		t.Fatalf("oversized request: %+v %s", r.Error, r.Result)
	}
	if !s.ping() {
		t.Fatal("the server stopped answering after an oversized request")
	}
	var st struct{ Changes []struct{ Path string } }
	s.call("status", map[string]any{"tx": tx}).decode(t, &st)
	if len(st.Changes) != 0 {
		t.Fatalf("part of an oversized request was acted on: %+v", st.Changes)
	}

	// Negative control: the SDK's transport ends the session.
	c := startMCP(t, wtxtest.Binary(t, true), ws, state, []string{"WTX_DISABLE=line-framing"})
	ctx := c.beginStage(map[string]any{})
	_, _ = c.in.Write(append(big(c, ctx), '\n')) // the server may end before it took every byte
	if !c.waitExit(wtxtest.Patience(t)) {
		t.Fatal("control: the SDK's transport kept serving after an oversized frame")
	}
}
