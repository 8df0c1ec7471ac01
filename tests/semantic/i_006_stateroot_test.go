package semantic

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// TestI006_StateRootThroughAlias checks I-006 for the state root's place:
// a workspace reached through a bind mount is the same directory, so a
// state root inside it is refused (precondition.state-in-workspace) as it
// is through the workspace's own path; otherwise a copy stage copies the
// state root into itself and an apply writes into wtx's own state. The
// negative control (identity by path only, and the mount check of T-001
// off) must let it through.
func TestI006_StateRootThroughAlias(t *testing.T) {
	t.Parallel()
	for _, disable := range []bool{false, true} {
		name := "identity"
		if disable {
			name = "negative-control"
		}
		t.Run(name, func(t *testing.T) {
			e := newStateEnv(t)
			e.st = filepath.Join(e.ws, "state")
			fp := *e
			fp.bin = wtxtest.Binary(t, true)
			if disable {
				fp.env = []string{"WTX_DISABLE=identity,state-apart-mounts"}
			}
			if r := fp.runIn(e.ws, nil, "list"); r.code != 1 || !strings.Contains(r.stderr, "inside the workspace") {
				t.Fatalf("through the workspace's own path: want the refusal, got %v", r)
			}
			alias := filepath.Join(filepath.Dir(e.ws), "alias")
			if err := os.Mkdir(alias, 0o755); err != nil {
				t.Fatal(err)
			}
			prefix := bindAlias(t, e.ws, alias)
			r := fp.runIn(alias, prefix, "--json", "list")
			refused := r.code == 1 && strings.Contains(r.stdout, `"precondition.state-in-workspace"`)
			if disable {
				if refused {
					t.Fatalf("negative control: with identity by path only the alias was still refused: the test cannot fail: %v", r)
				}
				return
			}
			if !refused {
				t.Errorf("through a bind mount of the workspace, a state root inside it was used: %v", r)
			}
		})
	}
}
