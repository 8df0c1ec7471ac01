package semantic

import (
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
		if err == nil && strings.ContainsRune(d.Name(), '\uFFFD') {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func TestI001MCPInvalidUTF8Refused(t *testing.T) {
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
