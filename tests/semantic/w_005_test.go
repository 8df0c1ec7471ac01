package semantic

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// w005Proposals are agents' proposals, each against the allowlist
// paths = ["docs/**"], ops = ["write", "edit"], max_bytes = 64, max_ops = 3.
// ok says whether it is inside it.
var w005Proposals = []struct {
	name, script string
	ok           bool
}{
	{"inside", `printf '%s\n' '{"command":"write","path":"docs/a.md","content":"A\n"}' '{"command":"edit","path":"docs/keep.md","old":"keep","new":"kept"}'`, true},
	{"outside-path", `printf '%s\n' '{"command":"write","path":"docs/a.md","content":"A\n"}' '{"command":"write","path":"src/evil.sh","content":"x"}'`, false},
	{"parent-path", `printf '%s\n' '{"command":"write","path":"docs/../src/evil.sh","content":"x"}'`, false},
	{"op-kind", `printf '%s\n' '{"command":"rm","path":"docs/keep.md"}'`, false},
	{"too-large", `printf '{"command":"write","path":"docs/big.md","content":"%s"}\n' "$(head -c 65 /dev/zero | tr '\0' x)"`, false},
	{"too-many", `for i in 1 2 3 4; do printf '{"command":"write","path":"docs/%s.md","content":"x"}\n' $i; done`, false},
	// What an agent writes itself never lands: its view is read-only (the
	// write fails and the proposal goes on), or, on a backend that cannot
	// make it so, the step is refused.
	{"writes-itself", `echo mine > docs/own.md 2>/dev/null || true; printf '%s\n' '{"command":"write","path":"docs/a.md","content":"A\n"}'`, true},
	{"not-json", `echo 'rm -rf /'`, false},
}

func w005Check(t *testing.T, only map[string]bool, env ...string) []string {
	var bad []string
	for _, p := range w005Proposals {
		if only != nil && !only[p.name] {
			continue
		}
		e := newFlowEnv(t, true, env...)
		if err := os.MkdirAll(filepath.Join(e.ws, "docs"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(e.ws, "src"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(e.ws, "docs", "keep.md"), []byte("keep\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		agent := e.script("agent.sh", p.script+"\n")
		f := e.file("w005.toml", fmt.Sprintf(`version = 1
[[steps]]
name = "agent"
kind = "agent"
command = [%q]
[steps.allow]
paths = ["docs/**"]
ops = ["write", "edit"]
max_bytes = 64
max_ops = 3
`, agent))
		before := wtxtest.MustSnapshot(t, e.ws)
		out, r := e.flowJSON(nil, "flow", "run", f)
		after := wtxtest.MustSnapshot(t, e.ws)
		if _, err := os.Lstat(filepath.Join(e.ws, "docs", "own.md")); err == nil {
			bad = append(bad, fmt.Sprintf("%s: what the agent wrote itself landed in the workspace", p.name))
		}
		if p.name == "writes-itself" && out.Run.Status == "failed" {
			continue
		}
		if p.ok {
			if out.Run.Status != "done" || after == before {
				bad = append(bad, fmt.Sprintf("%s: a proposal inside the allowlist was not executed (status %s)\n%s%s", p.name, out.Run.Status, r.stdout, r.stderr))
			}
			continue
		}
		if after != before {
			bad = append(bad, fmt.Sprintf("%s: a proposal outside the allowlist wrote to the workspace:\n%s\nwas\n%s", p.name, after, before))
		}
		if out.Run.Status != "failed" || r.code == 0 {
			bad = append(bad, fmt.Sprintf("%s: the run is %s (exit %d), not failed", p.name, out.Run.Status, r.code))
			continue
		}
		a := out.Run.Steps[0].Attempts
		if res := a[len(a)-1].Result; res == nil || res.Error == nil || res.OpID != "" {
			bad = append(bad, fmt.Sprintf("%s: the failed step records no refusal, or an op", p.name))
		} else if res.Error.Code != "refusal.proposal" {
			bad = append(bad, fmt.Sprintf("%s: refused as %s, want refusal.proposal", p.name, res.Error.Code))
		}
		if lst := e.run(nil, "list"); strings.Contains(lst.stdout, "open") {
			bad = append(bad, fmt.Sprintf("%s: a refused proposal left an open stage:\n%s", p.name, lst.stdout))
		}
	}
	return bad
}

// TestW005_AgentProposesWithinAllowlist: an agent step's proposal is
// executed only when every op is inside the step's allowlist (paths, op
// kinds, sizes, count); otherwise it is refused with nothing written, and
// what the agent writes itself never lands.
func TestW005_AgentProposesWithinAllowlist(t *testing.T) {
	t.Parallel()
	bad := w005Check(t, nil)
	t.Logf("W-005: %d proposals, %d violations", len(w005Proposals), len(bad))
	for _, b := range bad {
		t.Error(b)
	}
}

// TestW005_NegativeControlNoAllowlist executes proposals unchecked
// (WTX_DISABLE=proposal): the harness must see them write.
func TestW005_NegativeControlNoAllowlist(t *testing.T) {
	t.Parallel()
	bad := w005Check(t, map[string]bool{"outside-path": true, "op-kind": true, "too-large": true}, "WTX_DISABLE=proposal")
	t.Logf("negative control (allowlist not checked): %d violations", len(bad))
	if len(bad) == 0 {
		t.Fatal("with the allowlist unchecked nothing broke: the harness cannot fail")
	}
}
