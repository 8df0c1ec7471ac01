package semantic

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// discardScript writes one file that lands and two under excluded
// selectors that are discarded.
const discardScript = "mkdir -p cache/deep && echo x > cache/deep/x && echo k > s.key && echo n > n.txt"

// checkDiscardNotice checks what a run that wrote under --exclude says:
// the summary names the discarded paths, --json carries left_out, and the
// signed receipt (and the apply's) count them with the first paths. It
// returns false when the notice is missing (the negative control).
func checkDiscardNotice(t *testing.T, e *stateEnv, backend string) bool {
	t.Helper()
	args := []string{"run", "--backend", backend, "--exclude", "cache", "--exclude", "*.key", "--keep", "--", "sh", "-c", discardScript}
	r := e.run(args...)
	if r.code != 0 {
		t.Skipf("backend %s: %s", backend, strings.TrimSpace(r.stderr))
	}
	ok := true
	if !strings.Contains(r.stderr, "left out by --exclude") || !strings.Contains(r.stderr, "x cache/") || !strings.Contains(r.stderr, "x s.key") {
		t.Logf("%s: the run summary does not name what --exclude discarded:\n%s", backend, r.stderr)
		ok = false
	}
	var run struct {
		Tx      string `json:"tx"`
		LeftOut []struct {
			Path string `json:"path"`
		} `json:"left_out"`
	}
	if err := json.Unmarshal([]byte(e.must(append([]string{"--json"}, args...)...).stdout), &run); err != nil {
		t.Fatal(err)
	}
	if len(run.LeftOut) != 2 {
		t.Logf("%s: run --json left_out %+v, want cache and s.key", backend, run.LeftOut)
		ok = false
	}
	e.must("apply", run.Tx)
	for _, ref := range []string{"run", "apply"} {
		var all struct {
			Receipts []struct {
				Receipt struct {
					Kind         string   `json:"kind"`
					LeftOut      int      `json:"left_out"`
					LeftOutPaths []string `json:"left_out_paths"`
				} `json:"receipt"`
				Envelope json.RawMessage `json:"envelope"`
			} `json:"receipts"`
		}
		if err := json.Unmarshal([]byte(e.must("--json", "receipt", run.Tx, "--all").stdout), &all); err != nil {
			t.Fatal(err)
		}
		for _, rc := range all.Receipts {
			if rc.Receipt.Kind != ref {
				continue
			}
			if rc.Receipt.LeftOut != 2 || strings.Join(rc.Receipt.LeftOutPaths, ",") != "cache,s.key" {
				t.Logf("%s: %s receipt counts %d left out (%v), want 2 (cache, s.key)", backend, ref, rc.Receipt.LeftOut, rc.Receipt.LeftOutPaths)
				ok = false
			}
			p := filepath.Join(t.TempDir(), "r.json")
			if err := os.WriteFile(p, rc.Envelope, 0o644); err != nil {
				t.Fatal(err)
			}
			e.must("receipt", "verify", p)
		}
	}
	if _, err := os.Lstat(filepath.Join(e.ws, "cache")); err == nil {
		t.Logf("%s: a discarded path reached the workspace", backend)
		ok = false
	}
	return ok
}

// TestI008_DiscardNotice checks issue 16 item 5 on every backend: writes
// under excluded selectors are discarded and said so — run summary,
// run --json, the run's and the apply's signed receipts.
func TestI008_DiscardNotice(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"copy", "overlay", "clone"} {
		t.Run(backend, func(t *testing.T) {
			e := newStateEnv(t)
			if !checkDiscardNotice(t, e, backend) {
				t.Error("a discard was silent")
			}
		})
	}
}

// TestI008_DiscardNoticeMCP checks the same over MCP: the run tool's
// answer lists left_out and its receipt counts them.
func TestI008_DiscardNoticeMCP(t *testing.T) {
	t.Parallel()
	ws, state := mcpWorkspace(t, map[string]string{"a.txt": "a\n"})
	s := startMCP(t, wtxtest.Binary(t, false), ws, state, nil)
	tx := s.beginStage(map[string]any{"exclude": []string{"cache", "*.key"}})
	var run struct {
		LeftOut []struct {
			Path string `json:"path"`
		} `json:"left_out"`
		Receipt struct {
			LeftOut      int      `json:"left_out"`
			LeftOutPaths []string `json:"left_out_paths"`
		} `json:"receipt"`
	}
	s.call("run", map[string]any{"tx": tx, "argv": []string{"sh", "-c", discardScript}}).decode(t, &run)
	if len(run.LeftOut) != 2 || run.Receipt.LeftOut != 2 || strings.Join(run.Receipt.LeftOutPaths, ",") != "cache,s.key" {
		t.Errorf("MCP run: left_out %+v, receipt %+v; want cache and s.key in both", run.LeftOut, run.Receipt)
	}
}

// TestI008_DiscardNoticeNegativeControl switches the notice off (failpoint
// build, WTX_DISABLE=left-out-notice): the writes are still discarded, but
// silently, and the check above reports it.
func TestI008_DiscardNoticeNegativeControl(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t)
	e.bin = wtxtest.Binary(t, true)
	e.env = []string{"WTX_DISABLE=left-out-notice"}
	if checkDiscardNotice(t, e, "copy") {
		t.Error("with exclusion off, the discard check still passes")
	}
}
