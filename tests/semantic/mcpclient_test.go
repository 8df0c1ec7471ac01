package semantic

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// mcpServer is 'wtx mcp' driven line by line over its stdin and stdout, as
// a client does, so a test can also send what no client library would: a
// line that is not JSON, a frame over the limit, bytes that are not UTF-8.
type mcpServer struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	lines  chan []byte   // lines the server wrote, in order
	exited chan struct{} // closed when the process has ended
	stderr *lockedBuffer
	nextID int
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// mcpWorkspace makes a workspace holding files and a state root beside it.
func mcpWorkspace(t *testing.T, files map[string]string) (ws, state string) {
	t.Helper()
	root := t.TempDir()
	ws, state = filepath.Join(root, "ws"), filepath.Join(root, "state")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	for p, c := range files {
		full := filepath.Join(ws, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ws, state
}

// startMCP starts bin as 'wtx -C ws mcp ARGS' with env added, and
// initializes the session.
func startMCP(t *testing.T, bin, ws, state string, env []string, args ...string) *mcpServer {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-C", ws, "mcp"}, args...)...)
	cmd.Env = append(append(os.Environ(), "WTX_STATE_DIR="+state), env...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &mcpServer{t: t, cmd: cmd, in: in, lines: make(chan []byte, 64), exited: make(chan struct{}), stderr: &lockedBuffer{}, nextID: 100}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			s.lines <- append([]byte(nil), sc.Bytes()...)
		}
		close(s.lines)
	}()
	go func() {
		_ = cmd.Wait() // the exit status is read from ProcessState
		close(s.exited)
	}()
	t.Cleanup(func() {
		in.Close()
		select {
		case <-s.exited:
		case <-time.After(wtxtest.Patience(t)):
			_ = cmd.Process.Kill() // a server that outlived its input; the test has failed already or fails below
			<-s.exited
			t.Errorf("wtx mcp did not end after its input closed; stderr:\n%s", s.stderr.String())
		}
	})
	id := s.request("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "semantic", "version": "1"}})
	if r := s.await(id, wtxtest.Patience(t)); r.Error != nil {
		t.Fatalf("initialize: %+v", r.Error)
	}
	s.notify("notifications/initialized", map[string]any{})
	return s
}

// rpcResponse is one JSON-RPC response line.
type rpcResponse struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Method string `json:"method"` // set on a notification from the server
}

// sendLine writes raw bytes and a newline to the server's input.
func (s *mcpServer) sendLine(line []byte) {
	s.t.Helper()
	if _, err := s.in.Write(append(line, '\n')); err != nil {
		s.t.Fatalf("write to wtx mcp: %v (stderr: %s)", err, s.stderr.String())
	}
}

func (s *mcpServer) request(method string, params any) int {
	s.t.Helper()
	s.nextID++
	data, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": s.nextID, "method": method, "params": params})
	if err != nil {
		s.t.Fatal(err)
	}
	s.sendLine(data)
	return s.nextID
}

func (s *mcpServer) notify(method string, params any) {
	s.t.Helper()
	data, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
	if err != nil {
		s.t.Fatal(err)
	}
	s.sendLine(data)
}

// next returns the next response line (skipping the server's
// notifications), or ok=false when the server wrote nothing more within d.
func (s *mcpServer) next(d time.Duration) (rpcResponse, bool) {
	s.t.Helper()
	deadline := time.After(d)
	for {
		select {
		case line, open := <-s.lines:
			if !open {
				return rpcResponse{}, false
			}
			var r rpcResponse
			if err := json.Unmarshal(line, &r); err != nil {
				s.t.Fatalf("wtx mcp wrote a line that is not JSON: %q", line)
			}
			if r.Method != "" {
				continue
			}
			return r, true
		case <-deadline:
			return rpcResponse{}, false
		}
	}
}

// await returns the response to request id.
func (s *mcpServer) await(id int, d time.Duration) rpcResponse {
	s.t.Helper()
	want := fmt.Sprint(id)
	for {
		r, ok := s.next(d)
		if !ok {
			s.t.Fatalf("no response to request %d within %v; stderr:\n%s", id, d, s.stderr.String())
		}
		if string(r.ID) == want {
			return r
		}
	}
}

// toolResult is a tools/call result.
type toolResult struct {
	IsError    bool            `json:"isError"`
	Structured json.RawMessage `json:"structuredContent"`
	Content    []struct {
		Text string `json:"text"`
	} `json:"content"`
}

func (r toolResult) text() string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// errorCode is the wtx error code of a failed tool call, or "".
func (r toolResult) errorCode() string {
	if !r.IsError {
		return ""
	}
	var e struct{ Error struct{ Code string } }
	if err := json.Unmarshal([]byte(r.text()), &e); err != nil {
		return "unparsed: " + r.text()
	}
	return e.Error.Code
}

// decode decodes a successful call's structured content into out.
func (r toolResult) decode(t *testing.T, out any) {
	t.Helper()
	if r.IsError {
		t.Fatalf("tool call failed: %s", r.text())
	}
	if err := json.Unmarshal(r.Structured, out); err != nil {
		t.Fatalf("decode %s: %v", r.Structured, err)
	}
}

func (s *mcpServer) callAsync(tool string, args any) int {
	s.t.Helper()
	return s.request("tools/call", map[string]any{"name": tool, "arguments": args})
}

func (s *mcpServer) result(id int, d time.Duration) toolResult {
	s.t.Helper()
	r := s.await(id, d)
	if r.Error != nil {
		s.t.Fatalf("request %d: JSON-RPC error %d %s", id, r.Error.Code, r.Error.Message)
	}
	var tr toolResult
	if err := json.Unmarshal(r.Result, &tr); err != nil {
		s.t.Fatalf("request %d: result %s: %v", id, r.Result, err)
	}
	return tr
}

func (s *mcpServer) call(tool string, args any) toolResult {
	s.t.Helper()
	return s.result(s.callAsync(tool, args), wtxtest.Patience(s.t))
}

// rawCall sends a tools/call whose arguments are the given JSON text
// verbatim (bytes that are not UTF-8 included).
func (s *mcpServer) rawCall(tool string, args []byte) toolResult {
	s.t.Helper()
	s.nextID++
	line := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":`, s.nextID, tool)
	line = append(append(line, args...), "}}"...)
	s.sendLine(line)
	return s.result(s.nextID, wtxtest.Patience(s.t))
}

// ping checks that the server still answers.
func (s *mcpServer) ping() bool {
	s.t.Helper()
	id := s.request("ping", map[string]any{})
	want := fmt.Sprint(id)
	for {
		r, ok := s.next(wtxtest.Patience(s.t))
		if !ok {
			return false
		}
		if string(r.ID) == want {
			return r.Error == nil
		}
	}
}

// waitExit reports whether the server process ended within d.
func (s *mcpServer) waitExit(d time.Duration) bool {
	select {
	case <-s.exited:
		return true
	case <-time.After(d):
		return false
	}
}

// beginStage opens a stage over MCP and returns its id.
func (s *mcpServer) beginStage(args map[string]any) string {
	s.t.Helper()
	var b struct{ Tx string }
	s.call("begin", args).decode(s.t, &b)
	if !strings.HasPrefix(b.Tx, "tx-") {
		s.t.Fatalf("begin gave %q", b.Tx)
	}
	return b.Tx
}

// processesWith lists the pids whose command line contains marker.
func processesWith(t *testing.T, marker string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	self := fmt.Sprint(os.Getpid())
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' || e.Name() == self {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // the process ended meanwhile
		}
		if bytes.Contains(data, []byte(marker)) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// waitProcesses waits until the number of processes with marker in their
// command line satisfies ok, and reports whether it did within d.
func waitProcesses(t *testing.T, marker string, d time.Duration, ok func(n int) bool) bool {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if ok(len(processesWith(t, marker))) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
