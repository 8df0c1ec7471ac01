package semantic

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// I-001 over MCP: a string that cannot carry its bytes (not UTF-8, or an
// unpaired surrogate escape) is refused as usage.invalid, never replaced by
// U+FFFD; path_b64, content_b64, old_b64 and new_b64 carry any bytes.

// replaced lists the names in dir holding U+FFFD, the mark of a
// substitution.
func replaced(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error { // an unreadable entry is not a substitution
		// The bytes of U+FFFD, not any byte that is not UTF-8.
		if err == nil && strings.Contains(d.Name(), "\uFFFD") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func TestI001MCPInvalidUTF8Refused(t *testing.T) {
	t.Parallel()
	bin := wtxtest.Binary(t, false)
	ws, state := mcpWorkspace(t, map[string]string{"a.txt": "a\n"})
	s := startMCP(t, bin, ws, state, nil)
	tx := s.beginStage(map[string]any{})
	for _, args := range []string{
		`{"tx":"` + tx + `","path":"bad` + "\xff" + `.txt","content":"x"}`,
		`{"tx":"` + tx + `","path":"ok.txt","content":"` + "\xfe\xff" + `"}`,
		`{"tx":"` + tx + `","path":"bad\ud800.txt","content":"x"}`,
		`{"tx":"` + tx + `","path":"ok.txt","content":"x\udc00y"}`,
	} {
		if r := s.rawCall("write", []byte(args)); r.errorCode() != "usage.invalid" {
			t.Fatalf("write %q: want usage.invalid, got %s", args, r.text())
		}
	}
	if r := s.rawCall("edit", []byte(`{"tx":"`+tx+`","path":"a.txt","old":"a","new":"`+"\xc3"+`"}`)); r.errorCode() != "usage.invalid" {
		t.Fatalf("edit with new not UTF-8: %s", r.text())
	}
	// A paired surrogate escape and a literal U+FFFD are ordinary text.
	if r := s.rawCall("write", []byte(`{"tx":"`+tx+`","path":"pair\ud83d\ude00.txt","content":"`+"\uFFFD"+`"}`)); r.IsError {
		t.Fatalf("a paired surrogate escape: %s", r.text())
	}
	if r := runWtx(t, ws, state, "apply", tx); r.code != 0 {
		t.Fatalf("apply: %d %s", r.code, r.stderr)
	}
	if data, err := os.ReadFile(filepath.Join(ws, "pair\U0001F600.txt")); err != nil || string(data) != "\uFFFD" {
		t.Fatalf("the paired escape's file: %q %v", data, err)
	}
	if got := replaced(t, ws); len(got) > 0 {
		t.Fatalf("names with U+FFFD appeared: %q", got)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "ok.txt")); data != nil {
		t.Fatalf("a refused write landed: %q", data)
	}

	// Negative control: with the check off, the same request lands a name
	// with U+FFFD in place of the byte, which the check above would see.
	ws2, state2 := mcpWorkspace(t, nil)
	c := startMCP(t, wtxtest.Binary(t, true), ws2, state2, []string{"WTX_DISABLE=utf8-check"})
	tx2 := c.beginStage(map[string]any{})
	if r := c.rawCall("write", []byte(`{"tx":"`+tx2+`","path":"bad`+"\xff"+`.txt","content":"x"}`)); r.IsError {
		t.Fatalf("control: %s", r.text())
	}
	if r := runWtx(t, ws2, state2, "apply", tx2); r.code != 0 {
		t.Fatalf("control apply: %d %s", r.code, r.stderr)
	}
	if got := replaced(t, ws2); len(got) != 1 {
		t.Fatalf("control: with the check off a substituted name should land, found %q", got)
	}
}

func TestI001MCPByteSafeFields(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"copy", "auto"} {
		t.Run(backend, func(t *testing.T) { mcpByteSafe(t, backend) })
	}
}

func mcpByteSafe(t *testing.T, backend string) {
	bin := wtxtest.Binary(t, false)
	ws, state := mcpWorkspace(t, map[string]string{"old\xfe.bin": "k\xffeep\x00\n", "plain.txt": "one two\n"})
	s := startMCP(t, bin, ws, state, nil)
	tx := s.beginStage(map[string]any{"backend": backend})
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	name, content := "new\xff\x01.txt", "\x00\xfe\xffbytes\n"

	var w struct {
		Path    string
		PathB64 string `json:"path_b64"`
	}
	s.call("write", map[string]any{"tx": tx, "path_b64": b64(name), "content_b64": b64(content)}).decode(t, &w)
	if w.PathB64 != b64(name) || w.Path != `"new\377\001.txt"` {
		t.Fatalf("write answered path %q path_b64 %q", w.Path, w.PathB64)
	}
	var rd struct {
		Path       string
		PathB64    string `json:"path_b64"`
		Content    string
		ContentB64 string `json:"content_b64"`
	}
	s.call("read", map[string]any{"tx": tx, "path_b64": b64("old\xfe.bin")}).decode(t, &rd)
	if rd.PathB64 != b64("old\xfe.bin") || rd.ContentB64 != b64("k\xffeep\x00\n") || rd.Content != "" {
		t.Fatalf("read answered %+v", rd)
	}
	s.call("edit", map[string]any{"tx": tx, "path_b64": b64("old\xfe.bin"), "old_b64": b64("\xffeep"), "new_b64": b64("\xfe\xfe")}).decode(t, &w)
	s.call("edit", map[string]any{"tx": tx, "path": "plain.txt", "old": "two", "new_b64": b64("\x80")}).decode(t, &w)
	// Both forms of one field at once is a usage error.
	if r := s.call("write", map[string]any{"tx": tx, "path": "x", "path_b64": b64("x")}); r.errorCode() != "usage.invalid" {
		t.Fatalf("path and path_b64 together: %s", r.text())
	}
	if r := s.call("write", map[string]any{"tx": tx, "path_b64": "%%%"}); r.errorCode() != "usage.invalid" {
		t.Fatalf("path_b64 that is not base64: %s", r.text())
	}
	if r := runWtx(t, ws, state, "apply", tx); r.code != 0 {
		t.Fatalf("apply: %d %s", r.code, r.stderr)
	}
	for p, want := range map[string]string{name: content, "old\xfe.bin": "k\xfe\xfe\x00\n", "plain.txt": "one \x80\n"} {
		if data, err := os.ReadFile(filepath.Join(ws, p)); err != nil || string(data) != want {
			t.Errorf("%q after apply: %q %v, want %q", p, data, err, want)
		}
	}
	if got := replaced(t, ws); len(got) > 0 {
		t.Fatalf("names with U+FFFD appeared: %q", got)
	}
	// rm by the exact bytes.
	tx2 := s.beginStage(map[string]any{"backend": backend})
	if r := s.call("rm", map[string]any{"tx": tx2, "path_b64": b64(name)}); r.IsError {
		t.Fatalf("rm: %s", r.text())
	}
	var st struct{ Changes []json.RawMessage }
	s.call("status", map[string]any{"tx": tx2}).decode(t, &st)
	if len(st.Changes) != 1 {
		t.Fatalf("status after rm: %d changes", len(st.Changes))
	}
}
