package semantic

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
)

// w001Points are the moments of a step's apply a crash is tried at: the
// journal written, the workspace written, the commit marker, inside the
// transaction that records the op and the step's result, after it, the
// stage settled, the journal gone, and the apply returned.
var w001Points = []string{"apply:journaled", "apply:synced", "apply:committed", "flow:record-step",
	"apply:recorded", "apply:settled", "apply:done", "flow:applied"}

// w001Case crashes a two-step flow at point, lets the next command recover,
// and returns the violations of W-001: every op of the run's stages must
// have its step's result, and every recorded result's op must exist.
func w001Case(t *testing.T, point string, env ...string) []string {
	e := newFlowEnv(t, true, env...)
	f := e.file("w001.toml", `version = 1

[[steps]]
name = "make"
kind = "run"
command = ["sh", "-c", "mkdir -p out && echo one > out/one.txt && echo made"]

[[steps]]
name = "more"
kind = "batch"
[[steps.ops]]
command = "write"
path = "out/two.txt"
content = "two\n"
`)
	r := e.run([]string{"WTX_FAILPOINT=" + point}, "-q", "flow", "run", f, "--name", "w1")
	var bad []string
	if r.code != -1 {
		bad = append(bad, fmt.Sprintf("%s: the run was not killed (exit %d)", point, r.code))
	}
	ops := e.ops() // opens the workspace: recovery finishes or rolls back the apply
	out, _ := e.flowJSON(nil, "flow", "show", "w1")
	recorded := map[string]bool{}
	for _, s := range out.Run.Steps {
		for _, a := range s.Attempts {
			if a.Result != nil && a.Result.OpID != "" {
				recorded[a.Result.OpID] = true
				if a.Status != "done" {
					bad = append(bad, fmt.Sprintf("%s: step %s holds op %s with status %s", point, s.Name, a.Result.OpID, a.Status))
				}
			}
		}
	}
	if !sameKeys(ops, recorded) {
		bad = append(bad, fmt.Sprintf("%s: ops in the workspace's log %v, ops in the run's results %v: an op and its step's result must both be there or neither", point, keys(ops), keys(recorded)))
	}
	// And the run goes on from there to the same end.
	fin, _ := e.flowJSON(nil, "flow", "resume", "w1")
	if fin.Run.Status != "done" {
		bad = append(bad, fmt.Sprintf("%s: resume ends %s", point, fin.Run.Status))
	}
	return bad
}

func sameKeys(a, b map[string]bool) bool {
	return strings.Join(keys(a), ",") == strings.Join(keys(b), ",")
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestW001_StepResultAndOpAreOne crashes a step's apply at each of its
// points: after recovery the op and the step's result are both recorded,
// or neither.
func TestW001_StepResultAndOpAreOne(t *testing.T) {
	t.Parallel()
	points := w001Points
	if os.Getenv("WTX_SOAK") == "" {
		// The points either side of the commit marker and of the record.
		points = []string{"apply:synced", "apply:committed", "flow:record-step", "apply:recorded", "flow:applied"}
	}
	var bad []string
	for _, p := range points {
		bad = append(bad, w001Case(t, p)...)
	}
	t.Logf("W-001: %d crash points, %d violations", len(points), len(bad))
	for _, b := range bad {
		t.Error(b)
	}
}

// TestW001_NegativeControlResultApart records the step's result in a
// transaction of its own after the op (WTX_DISABLE=flow-atomic): a crash
// between the two must leave an op without its result.
func TestW001_NegativeControlResultApart(t *testing.T) {
	t.Parallel()
	var bad []string
	for _, p := range []string{"apply:committed", "flow:applied"} {
		bad = append(bad, w001Case(t, p, "WTX_DISABLE=flow-atomic")...)
	}
	t.Logf("negative control (result recorded apart from the op): %d violations", len(bad))
	if len(bad) == 0 {
		t.Fatal("with the result recorded apart from its op nothing broke: the harness cannot fail")
	}
}
