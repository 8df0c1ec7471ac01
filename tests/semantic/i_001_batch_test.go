package semantic

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestI001BatchOneFormPerField checks I-001 for batch input: a field given
// both as text and in its byte-safe form (path and path_b64, content and
// content_b64, old and old_b64, new and new_b64) is refused as
// usage.invalid with nothing written, never resolved by picking one of
// them (the MCP tools refuse the same).
func TestI001BatchOneFormPerField(t *testing.T) {
	t.Parallel()
	ws, state := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "e.txt"), []byte("old text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// "aGlkZGVu" is base64 of "hidden".
	for name, line := range map[string]string{
		"path":    `{"command":"write","path":"shown","path_b64":"aGlkZGVu","content":"x"}`,
		"content": `{"command":"write","path":"c.txt","content":"shown","content_b64":"aGlkZGVu"}`,
		"old":     `{"command":"edit","path":"e.txt","old":"old","old_b64":"aGlkZGVu","new":"new"}`,
		"new":     `{"command":"edit","path":"e.txt","old":"old","new":"shown","new_b64":"aGlkZGVu"}`,
	} {
		t.Run(name, func(t *testing.T) {
			r := runWtxStdin(t, ws, state, `{"command":"write","path":"first","content":"1"}`+"\n"+line+"\n", "--json", "batch", "--atomic")
			if r.code != 1 || !strings.Contains(r.stdout, `"code":"usage.invalid"`) {
				t.Errorf("%s given both ways: want usage.invalid (exit 1), got %v", name, r)
			}
			for _, f := range []string{"first", "shown", "hidden", "c.txt"} {
				if _, err := os.Lstat(filepath.Join(ws, f)); err == nil {
					t.Errorf("%s given both ways: %s was written", name, f)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(ws, "e.txt")); string(b) != "old text\n" {
				t.Errorf("%s given both ways: e.txt is %q", name, b)
			}
		})
	}
}
