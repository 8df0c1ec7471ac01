package mcpserve

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

func TestCheckText(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{`{"path":"a.txt"}`, true},
		{`{"path":"caf\u00e9 \ud83d\ude00 ` + "\uFFFD" + `"}`, true},
		{`{"path":"a\\ud800"}`, true}, // an escaped backslash, then text
		{`{"path":"a` + "\xff" + `"}`, false},
		{`{"path":"` + "\xed\xa0\x80" + `"}`, false}, // a surrogate in UTF-8 form
		{`{"path":"\ud800"}`, false},
		{`{"path":"\udc00\ud800"}`, false},
		{`{"path":"\ud800\u0041"}`, false},
		{`{"path":"\uD83D\uDE00"}`, true},
		{`{"path":"\ud800`, false},
	} {
		err := checkText([]byte(c.in))
		if (err == nil) != c.ok {
			t.Errorf("checkText(%q) = %v, want ok=%v", c.in, err, c.ok)
		}
	}
}

func TestPeekID(t *testing.T) {
	for in, want := range map[string]string{
		`{"jsonrpc":"2.0","id":7,"method":"x","params":{"content":"xxxxx`:    "7",
		`{"jsonrpc":"2.0","params":{"a":[1,2,{"id":3}]},"id":"s-1","method"`: `"s-1"`,
		`{"jsonrpc":"2.0","method":"x","params":{"content":"xxxxx`:           "",
		`{"id":{"x":1}}`: "",
		`["id",1]`:       "",
	} {
		if got := string(peekID([]byte(in))); got != want {
			t.Errorf("peekID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReadLine(t *testing.T) {
	long := strings.Repeat("y", idPrefix+5000)
	br := bufio.NewReaderSize(strings.NewReader("a\r\n"+long+"\nb\n"+strings.Repeat("z", 100)+"\nlast"), 16)
	for _, want := range []struct {
		line string
		over bool
		err  error
	}{{"a", false, nil}, {long[:idPrefix], true, nil}, {"b", false, nil}, {strings.Repeat("z", 100), false, nil}, {"last", false, io.EOF}} {
		line, over, err := readLine(br, 100)
		if string(line) != want.line || over != want.over || err != want.err {
			t.Fatalf("readLine = %.20q (%d bytes) over=%v err=%v, want %.20q over=%v err=%v", line, len(line), over, err, want.line, want.over, want.err)
		}
	}
}

// pipeServer serves cfg in-process and returns the client's ends.
func pipeServer(t *testing.T, cfg Config) (send func(string), recv func() map[string]any, in io.WriteCloser, done <-chan error) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	errc := make(chan error, 1)
	go func() { errc <- Serve(context.Background(), cfg, inR, outW) }()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	send = func(s string) {
		t.Helper()
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	recv = func() map[string]any {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the server's output ended")
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("not JSON: %q", l)
			}
			return m
		case <-time.After(wtxtest.Patience(t)):
			t.Fatal("no reply")
		}
		return nil
	}
	t.Cleanup(func() { inW.Close(); outR.Close() })
	return send, recv, inW, errc
}

func TestLineTransportAnswersBadLines(t *testing.T) {
	send, recv, in, done := pipeServer(t, Config{Dir: t.TempDir(), MaxRequest: 1024})
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if r := recv(); r["id"] != float64(1) || r["error"] != nil {
		t.Fatalf("initialize: %v", r)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	errCode := func(r map[string]any) float64 {
		e, _ := r["error"].(map[string]any)
		c, _ := e["code"].(float64)
		return c
	}
	for _, c := range []struct {
		line string
		id   any
		code float64
	}{
		{"not json", nil, -32700},
		{"{", nil, -32700},
		{`[{"jsonrpc":"2.0","id":3,"method":"ping"}]`, nil, -32600},
		{`{"jsonrpc":"1.0","id":4,"method":"ping"}`, float64(4), -32600},
		{`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"write","arguments":{"content":"` + strings.Repeat("x", 4000) + `"}}}`, float64(5), -32600},
		{strings.Repeat(" ", 3000) + "x", nil, -32600},
	} {
		send(c.line)
		r := recv()
		if r["id"] != c.id || errCode(r) != c.code {
			t.Fatalf("reply to %.40q: %v, want id %v code %v", c.line, r, c.id, c.code)
		}
		if _, has := r["id"]; !has {
			t.Fatalf("reply to %.40q has no id member (JSON-RPC wants null): %v", c.line, r)
		}
		send(`{"jsonrpc":"2.0","id":99,"method":"ping"}`)
		if r := recv(); r["id"] != float64(99) || r["error"] != nil {
			t.Fatalf("ping after %.40q: %v", c.line, r)
		}
	}
	// Lines the SDK takes but must not end the session over.
	send(`{"jsonrpc":"2.0","id":6,"method":""}`)
	if r := recv(); r["id"] != float64(6) || r["error"] == nil {
		t.Fatalf("empty method: %v", r)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":5}`)
	send(`{"jsonrpc":"2.0","id":"nobody-asked","result":{}}`)
	send(`{"jsonrpc":"2.0","id":98,"method":"tools/call","params":{"name":"nope","arguments":{}}}`)
	if r := recv(); r["id"] != float64(98) {
		t.Fatalf("unknown tool: %v", r)
	}
	send(`{"jsonrpc":"2.0","id":99,"method":"ping"}`)
	if r := recv(); r["id"] != float64(99) || r["error"] != nil {
		t.Fatalf("ping after odd messages: %v", r)
	}
	// Blank lines are skipped; the end of the input ends the session.
	send("")
	send("\r")
	in.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after the input ended: %v", err)
		}
	case <-time.After(wtxtest.Patience(t)):
		t.Fatal("Serve did not return after its input ended")
	}
}

func TestToolsByAuthority(t *testing.T) {
	list := func(cfg Config) map[string]*mcp.Tool {
		st, ct := mcp.NewInMemoryTransports()
		ctx := context.Background()
		ss, err := NewServer(cfg).Connect(ctx, st, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ss.Close()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*mcp.Tool{}
		for _, tool := range res.Tools {
			out[tool.Name] = tool
		}
		return out
	}
	all := list(Config{Dir: "/ws"})
	for _, n := range []string{"begin", "read", "write", "edit", "rm", "status", "diff", "apply", "drop", "run",
		"list", "log", "rebase", "undo", "apply_hunks"} {
		if all[n] == nil {
			t.Errorf("a plain server lacks %s", n)
		}
	}
	if !strings.Contains(all["apply"].Description, "person") {
		t.Errorf("apply's description should say a person approves protected paths: %q", all["apply"].Description)
	}
	if d := list(Config{Dir: "/ws", AllowApprove: true})["apply"].Description; strings.Contains(d, "person") {
		t.Errorf("with AllowApprove apply's description: %q", d)
	}
	po := list(Config{Dir: "/ws", ProposeOnly: true})
	for n := range po {
		if n == "apply" || n == "drop" || n == "undo" || n == "apply_hunks" || n == "rebase" {
			t.Errorf("a propose-only server offers %s", n)
		}
	}
	if len(po) != len(all)-5 {
		t.Errorf("propose-only offers %d tools, want %d", len(po), len(all)-5)
	}
	if !strings.Contains(all["run"].Description, "at most 3600") {
		t.Errorf("run's description should give the timeouts: %q", all["run"].Description)
	}
}
