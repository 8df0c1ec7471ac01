package semantic

import (
	"fmt"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// forkCheck runs the five-step crash flow, forks it at step 2, and returns
// the violations: the fork's first own step must see the tree right after
// step 2 (its base is step 2's result), the steps up to 2 are shared and
// never run again, the later steps apply cleanly, the original run is left
// as it was, and the workspace ends as the original left it.
func forkCheck(t *testing.T, env ...string) []string {
	e := newFlowEnv(t, true, env...)
	f := crashFlow(e)
	orig, r := e.flowJSON(nil, "flow", "run", f, "--name", "orig")
	if orig.Run.Status != "done" {
		t.Fatalf("run: %s\n%s%s", orig.Run.Status, r.stdout, r.stderr)
	}
	tree := wtxtest.MustSnapshot(t, e.ws)
	counter := len(e.counter())
	fork, r := e.flowJSON(nil, "flow", "fork", "orig", "--at", "emit", "--name", "forked")
	var bad []string
	if fork.Run.Status != "done" || r.code != 0 {
		bad = append(bad, fmt.Sprintf("the fork's later steps did not apply cleanly: %s (exit %d)\n%s%s", fork.Run.Status, r.code, r.stdout, r.stderr))
		return bad
	}
	if fork.Run.ForkedFrom != orig.Run.ID {
		bad = append(bad, fmt.Sprintf("the fork names %q as its origin, want %s", fork.Run.ForkedFrom, orig.Run.ID))
	}
	after2 := orig.Run.Steps[1].Attempts[len(orig.Run.Steps[1].Attempts)-1].Result.ResultDigest
	base3 := fork.Run.Steps[2].Attempts[0].Result.BaseDigest
	if base3 != after2 {
		bad = append(bad, fmt.Sprintf("the fork's step 3 saw %s, not the tree after step 2 (%s)", base3, after2))
	}
	for i := 0; i < 2; i++ {
		o, f := orig.Run.Steps[i].Attempts, fork.Run.Steps[i].Attempts
		if len(f) != 1 || f[0].Result == nil || f[0].Result.OpID != o[len(o)-1].Result.OpID {
			bad = append(bad, fmt.Sprintf("step %d of the fork is not the original's result", i+1))
		}
	}
	if got := len(e.counter()); got != counter {
		bad = append(bad, fmt.Sprintf("forking ran a shared step again (counter %d → %d)", counter, got))
	}
	if got := fork.results(); got != orig.results() {
		// The later steps find their changes in place: same digests, no op.
		t.Logf("fork results:\n%s\noriginal:\n%s", got, orig.results())
	}
	again, _ := e.flowJSON(nil, "flow", "show", "orig")
	if again.results() != orig.results() || len(again.Run.Steps[2].Attempts) != 1 {
		bad = append(bad, "the original run changed when it was forked")
	}
	if got := wtxtest.MustSnapshot(t, e.ws); got != tree {
		bad = append(bad, fmt.Sprintf("the workspace after the fork differs from the original's end:\n%s\nwant\n%s", got, tree))
	}
	return bad
}

// TestW004_FlowForkAtStep2: a flow forked at step 2 starts from the tree
// after step 2, shares the steps before, and its later steps apply
// cleanly; the original run is untouched.
func TestW004_FlowForkAtStep2(t *testing.T) {
	t.Parallel()
	bad := forkCheck(t)
	t.Logf("W-004 (flow fork): %d violations", len(bad))
	for _, b := range bad {
		t.Error(b)
	}
}

// TestW004_NegativeControlFlowForkIgnoresAt opens the fork's first step on
// the current workspace instead of the state after the fork point
// (WTX_DISABLE=fork-at): the harness must see it.
func TestW004_NegativeControlFlowForkIgnoresAt(t *testing.T) {
	t.Parallel()
	bad := forkCheck(t, "WTX_DISABLE=fork-at")
	t.Logf("negative control (fork ignores its point): %d violations", len(bad))
	if len(bad) == 0 {
		t.Fatal("with the fork point ignored nothing broke: the harness cannot fail")
	}
}
