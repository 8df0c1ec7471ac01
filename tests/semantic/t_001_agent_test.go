//go:build linux

package semantic

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// TestT_001_ExcludeLinkFromProjectAndAgent checks T-001 where the exclude
// selector and the commands come from elsewhere than a person's command
// line: excludes from the workspace's .wtx.toml with runs from the command
// line, and an MCP agent on a --propose-only server whose stage takes its
// excludes from .wtx.toml or from its own begin call. Two runs of the
// agent (one replacing the excluded file's directory by a link to a
// directory outside the workspace, one more) never make wtx remove the
// file of that name there. Negative control (failpoint build,
// WTX_DISABLE=view-links): it is removed.
func TestT_001_ExcludeLinkFromProjectAndAgent(t *testing.T) {
	t.Parallel()
	for _, via := range []string{"project-file", "mcp-project-file", "mcp-begin-exclude"} {
		for _, control := range []bool{false, true} {
			name := via
			if control {
				name += "/negative-control"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				files := map[string]string{"a.txt": "a\n", "d/secret.pem": "ws\n"}
				if via != "mcp-begin-exclude" {
					files[".wtx.toml"] = "backend = \"overlay\"\nexclude = [\"d/secret.pem\"]\n"
				}
				ws, state := mcpWorkspace(t, files)
				if r := runWtx(t, ws, state, "run", "--backend", "overlay", "--", "true"); r.code != 0 {
					t.Skipf("the overlay backend cannot stage here: %s", r.stderr)
				}
				victim := filepath.Join(filepath.Dir(ws), "victim")
				mustWrite(t, filepath.Join(victim, "secret.pem"), "victim\n")
				var env []string
				if control {
					env = []string{"WTX_DISABLE=view-links"}
				}
				link := []string{"sh", "-c", `rm -rf d && ln -s "$0" d`, victim}
				if via == "project-file" {
					for _, args := range [][]string{{"begin", "--name", "s"}, append([]string{"run", "--tx", "s", "--"}, link...), {"run", "--tx", "s", "--", "true"}} {
						if r := wtxWith(t, control, env, ws, state, args...); r.code != 0 {
							t.Fatalf("wtx %v: exit %d: %s", args, r.code, r.stderr)
						}
					}
				} else {
					s := startMCP(t, wtxtest.Binary(t, control), ws, state, env, "--propose-only")
					args := map[string]any{}
					if via == "mcp-begin-exclude" {
						args = map[string]any{"backend": "overlay", "exclude": []string{"d/secret.pem"}}
					}
					r := s.call("begin", args)
					if r.IsError && via == "mcp-begin-exclude" {
						t.Skipf("the server does not let an agent choose an exclude: %s", r.text())
					}
					var b struct{ Tx string }
					r.decode(t, &b)
					for _, argv := range [][]string{link, {"true"}} {
						if r := s.call("run", map[string]any{"tx": b.Tx, "argv": argv}); r.IsError {
							t.Fatalf("run %v: %s", argv, r.text())
						}
					}
				}
				_, err := os.Lstat(filepath.Join(victim, "secret.pem"))
				switch {
				case control && err == nil:
					t.Error("with links followed, the victim's file is still there: the check cannot fail")
				case !control && err != nil:
					t.Errorf("wtx removed a file outside the workspace: %v", err)
				}
			})
		}
	}
}
