//go:build linux

package semantic

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// stateScript tries to write wtx's state root from inside a run: a file at
// its top, a journal directory of the workspace (which the next wtx command
// would recover into the real workspace), and the stage through its upper
// directory and the overlay's mount point. It also writes the view, which
// must stay writable.
const stateScript = `
try() { name=$1; shift; if "$@" >/dev/null 2>&1; then echo "$name=ESCAPED"; else echo "$name=held"; fi; }
try state-root sh -c 'echo x > "$STATE/planted"'
try state-journal sh -c 'for d in "$STATE"/workspaces/*/; do mkdir -p "$d/journal/op-planted" && exit 0; done; exit 1'
try state-upper sh -c 'for d in "$STATE"/stages/*/; do echo x > "$d/upper/escape-upper" && exit 0; done; exit 1'
try state-merged sh -c 'for d in "$STATE"/stages/*/; do echo x > "$d/merged/escape-merged" && exit 0; done; exit 1'
echo staged > "$WS/staged.txt"
`

// planted lists what a command planted in the state root.
func planted(t *testing.T, state string) []string {
	var out []string
	_ = filepath.Walk(state, func(p string, fi os.FileInfo, err error) error { // a partial walk still finds what it finds
		if err == nil && (strings.HasPrefix(fi.Name(), "escape-") || fi.Name() == "planted" || fi.Name() == "op-planted") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// TestL006_StateRootReadOnlyEveryRun checks L-006 and L-003 for wtx's own
// state: on every run in a view (no switch, --no-network), as root and as
// an ordinary user, the command cannot write the state root (a journal
// planted there would be recovered into the real workspace by the next wtx
// command, without review), nor the stage through its upper directory or
// the overlay's mount point; the view itself stays writable. The negative
// control (failpoint build, WTX_DISABLE=confine-state) must see the state
// root written.
func TestL006_StateRootReadOnlyEveryRun(t *testing.T) {
	for _, id := range identities(t) {
		t.Run(id.name, func(t *testing.T) {
			t.Parallel()
			r := newEscapeRig(t, id, false)
			for _, flags := range [][]string{nil, {"--no-network"}} {
				res := r.runScript(t, stateScript, nil, flags...)
				overlayOrRefused(t, res)
				if len(res.outcomes) != 4 {
					t.Fatalf("%v: the script reported %v\n%s", flags, res.outcomes, res.stderr)
				}
				for name, v := range res.outcomes {
					if v != "held" {
						t.Errorf("%v: %s got through (as %s)", flags, name, id.name)
					}
				}
				if p := planted(t, r.state); len(p) > 0 {
					t.Errorf("%v: the command wrote the state root: %v", flags, p)
				}
				if counts, _ := res.json["counts"].(map[string]any); counts["added"] != 1.0 {
					t.Errorf("%v: the view's write was not staged: %v\n%s", flags, res.json["counts"], res.stderr)
				}
			}
		})
	}
}

// TestL006_StateRootNegativeControl switches the read-only state root off
// (failpoint build): the command must then write it, or the test above
// could not fail.
func TestL006_StateRootNegativeControl(t *testing.T) {
	for _, id := range identities(t) {
		t.Run(id.name, func(t *testing.T) {
			t.Parallel()
			r := newEscapeRig(t, id, true)
			res := r.runScript(t, stateScript, []string{"WTX_DISABLE=confine-state"})
			overlayOrRefused(t, res)
			for _, name := range []string{"state-root", "state-journal", "state-merged"} {
				if res.outcomes[name] != "ESCAPED" {
					t.Errorf("with the state root left writable, %s was still stopped\n%s", name, res.stderr)
				}
			}
			if len(planted(t, r.state)) == 0 {
				t.Errorf("with the state root left writable, nothing was planted: the check cannot fail")
			}
		})
	}
}

// TestL005_ProposeOnlyRunCannotPlantState checks L-005 with L-006: the
// command of an MCP run on a --propose-only server, on every backend that
// stages here, cannot write the state root (a planted journal would be
// recovered into the workspace by the person's next wtx command, with no
// approval), while its write in the view is staged. With the protection
// off (failpoint build, WTX_DISABLE=confine-state) the overlay run must
// plant it, or the check could not fail.
func TestL005_ProposeOnlyRunCannotPlantState(t *testing.T) {
	for _, backend := range []string{"overlay", "copy"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			for _, off := range []bool{false, true} {
				if off && backend != "overlay" {
					continue
				}
				ws, state := mcpWorkspace(t, map[string]string{"a.txt": "one\n"})
				if r := runWtx(t, ws, state, "run", "--backend", backend, "--", "true"); r.code != 0 {
					t.Skipf("the %s backend cannot stage here: %s", backend, r.stderr)
				}
				var env []string
				if off {
					env = []string{"WTX_DISABLE=confine-state"}
				}
				s := startMCP(t, wtxtest.Binary(t, off), ws, state, env, "--propose-only")
				tx := s.beginStage(map[string]any{"backend": backend})
				script := `echo x > "$0/planted"; for d in "$0"/workspaces/*/; do mkdir -p "$d/journal/op-planted"; done; echo made > b.txt; true`
				if r := s.call("run", map[string]any{"tx": tx, "argv": []string{"sh", "-c", script, state}}); r.IsError {
					t.Fatalf("run: %s", r.text())
				}
				got := planted(t, state)
				switch {
				case off && len(got) == 0:
					t.Errorf("with the state root left writable, the run planted nothing: the check cannot fail")
				case !off && len(got) > 0:
					t.Errorf("an MCP run wrote the state root: %v", got)
				}
				if r := runWtx(t, ws, state, "list"); r.code != 0 && !off {
					t.Errorf("wtx list after the run: %d %s", r.code, r.stderr)
				}
				if data, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(data) != "one\n" && !off {
					t.Errorf("the workspace changed: a.txt = %q", data)
				}
			}
		})
	}
}
