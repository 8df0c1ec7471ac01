package semantic

import (
	"fmt"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// w003Check replays a finished run and a run whose apply was interrupted,
// and returns the violations of W-003: a replay must show the recorded
// results, run no command (the steps' counter outside the workspace does
// not grow) and touch no workspace (not even to recover an apply).
func w003Check(t *testing.T, env ...string) []string {
	e := newFlowEnv(t, true, env...)
	f := crashFlow(e)
	first, r := e.flowJSON(nil, "flow", "run", f, "--name", "done")
	if first.Run.Status != "done" {
		t.Fatalf("run: %s\n%s%s", first.Run.Status, r.stdout, r.stderr)
	}
	// A second run of the same flow is killed in the middle of an apply
	// that has written the workspace but not committed.
	if r := e.run([]string{"WTX_FAILPOINT=apply:synced"}, "-q", "flow", "run", f, "--name", "cut"); r.code != -1 {
		t.Fatalf("the second run was not killed: exit %d\n%s", r.code, r.stderr)
	}
	// The first step of the second run changes nothing (the tree already
	// holds it); make sure the kill hit an apply that writes.
	tree := wtxtest.MustSnapshot(t, e.ws)
	counter := len(e.counter())
	var bad []string
	for i := 0; i < 2; i++ {
		show, sr := e.flowJSON(nil, "flow", "show", "done")
		if got, want := show.results(), first.results(); got != want {
			bad = append(bad, fmt.Sprintf("show's results differ from the run's:\n%s\nwant\n%s", got, want))
		}
		text := e.run(nil, "flow", "show", "done")
		if text.code != 0 || !strings.Contains(text.stdout, "+++ b/docs/summary.md") || !strings.Contains(text.stdout, "| {\"command\":\"write\"") {
			bad = append(bad, fmt.Sprintf("show does not show the diffs and outputs (exit %d):\n%s%s", text.code, text.stdout, sr.stderr))
		}
		e.flowJSON(nil, "flow", "show", "cut")
		e.flowJSON(nil, "flow", "list")
	}
	if got := len(e.counter()); got != counter {
		bad = append(bad, fmt.Sprintf("the steps' counter went from %d to %d: a replay ran a command", counter, got))
	}
	if got := wtxtest.MustSnapshot(t, e.ws); got != tree {
		bad = append(bad, fmt.Sprintf("the workspace changed during replay:\n%s\nwas\n%s", got, tree))
	}
	return bad
}

// TestW003_ReplayRunsNothing: flow show and flow list of a finished run and
// of one interrupted mid-apply run no command and leave the workspace as
// it was, byte for byte.
func TestW003_ReplayRunsNothing(t *testing.T) {
	t.Parallel()
	bad := w003Check(t)
	t.Logf("W-003: %d violations", len(bad))
	for _, b := range bad {
		t.Error(b)
	}
}

// TestW003_NegativeControlReplayRecovers lets flow show recover the
// interrupted apply (WTX_DISABLE=replay), as an ordinary command does: the
// harness must see the workspace change.
func TestW003_NegativeControlReplayRecovers(t *testing.T) {
	t.Parallel()
	bad := w003Check(t, "WTX_DISABLE=replay")
	t.Logf("negative control (replay recovers): %d violations", len(bad))
	if len(bad) == 0 {
		t.Fatal("with a replay that recovers nothing broke: the harness cannot fail")
	}
}
