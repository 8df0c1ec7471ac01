package semantic

import (
	"fmt"
	"testing"
)

// effectsCheck kills a run inside a step that declares an external effect
// and returns the violations: resume must stop for a decision (in-doubt,
// exit 1) without running the step again; --retry then runs it once more.
func effectsCheck(t *testing.T, env ...string) []string {
	e := newFlowEnv(t, true, env...)
	push := e.script("push.sh", `echo push >> "$FLOW_COUNTER"
echo pushed > pushed.txt
`)
	f := e.file("effects.toml", fmt.Sprintf(`version = 1
[[steps]]
name = "push"
kind = "run"
command = [%q]
effects = ["network"]
`, push))
	var bad []string
	if r := e.run([]string{"WTX_FAILPOINT=flow:staged"}, "-q", "flow", "run", f, "--name", "fx"); r.code != -1 {
		t.Fatalf("the run was not killed: exit %d\n%s", r.code, r.stderr)
	}
	if n := len(e.counter()); n != 1 {
		t.Fatalf("the step ran %d times before the kill, want 1", n)
	}
	out, r := e.flowJSON(nil, "flow", "resume", "fx")
	if out.Run.Status != "in-doubt" || r.code != 1 {
		bad = append(bad, fmt.Sprintf("resume after an interrupted step with effects: %s (exit %d), want in-doubt (exit 1)", out.Run.Status, r.code))
	}
	if n := len(e.counter()); n != 1 {
		bad = append(bad, fmt.Sprintf("resume ran the step with effects again on its own (%d runs)", n))
	}
	actions := map[string]bool{}
	for _, rp := range out.Run.Repairs {
		actions[rp.Action] = true
	}
	if len(bad) == 0 && (!actions["retry"] || !actions["skip"] || !actions["abandon"]) {
		bad = append(bad, fmt.Sprintf("in-doubt repairs %v lack retry, skip or abandon", actions))
	}
	out, _ = e.flowJSON(nil, "flow", "resume", "fx", "--retry")
	if out.Run.Status != "done" || len(e.counter()) != 2 {
		bad = append(bad, fmt.Sprintf("resume --retry: %s after %d runs, want done after 2", out.Run.Status, len(e.counter())))
	}
	return bad
}

// TestW002_InterruptedStepWithEffectsStopsForDecision: a step that declares
// external effects is not idempotent; interrupted, it is not run again
// without a decision.
func TestW002_InterruptedStepWithEffectsStopsForDecision(t *testing.T) {
	t.Parallel()
	for _, b := range effectsCheck(t) {
		t.Error(b)
	}
}

// TestW002_NegativeControlEffectsRerun lets resume run such a step again
// on its own (WTX_DISABLE=in-doubt): the harness must see it.
func TestW002_NegativeControlEffectsRerun(t *testing.T) {
	t.Parallel()
	bad := effectsCheck(t, "WTX_DISABLE=in-doubt")
	t.Logf("negative control (in-doubt steps re-run): %d violations", len(bad))
	if len(bad) == 0 {
		t.Fatal("with in-doubt steps re-run nothing broke: the harness cannot fail")
	}
}

// TestW002_ReviewFailAndSkip: a step kept for review stops the run until a
// resume applies it; a failed step applies nothing and stops the run until
// a resume runs it again or --skip records it skipped.
func TestW002_ReviewFailAndSkip(t *testing.T) {
	t.Parallel()
	e := newFlowEnv(t, false)
	f := e.file("rv.toml", `version = 1
[[steps]]
name = "gen"
kind = "run"
command = ["sh", "-c", "echo hi > hi.txt"]
on_success = "review"
[[steps]]
name = "broken"
kind = "run"
command = ["sh", "-c", "echo half > half.txt; exit 3"]
[[steps]]
name = "last"
kind = "batch"
[[steps.ops]]
command = "write"
path = "last.txt"
content = "last\n"
`)
	out, r := e.flowJSON(nil, "flow", "run", f, "--name", "rv")
	if out.Run.Status != "review" || r.code != 0 || exists(e.ws+"/hi.txt") {
		t.Fatalf("a review step: %s (exit %d), hi.txt in the workspace %v", out.Run.Status, r.code, exists(e.ws+"/hi.txt"))
	}
	out, r = e.flowJSON(nil, "flow", "resume", "rv")
	if out.Run.Status != "failed" || r.code != 1 || !exists(e.ws+"/hi.txt") || exists(e.ws+"/half.txt") {
		t.Fatalf("resume after review: %s (exit %d); want the reviewed step applied and the failing one stopping the run with nothing of it applied", out.Run.Status, r.code)
	}
	if a := out.Run.Steps[1].Attempts; a[0].Result == nil || a[0].Result.ExitCode == nil || *a[0].Result.ExitCode != 3 {
		t.Fatalf("the failed step's exit status is not recorded: %+v", a)
	}
	out, _ = e.flowJSON(nil, "flow", "resume", "rv")
	if out.Run.Status != "failed" || len(out.Run.Steps[1].Attempts) != 2 {
		t.Fatalf("resume of a failed step runs it again: %s, %d attempts", out.Run.Status, len(out.Run.Steps[1].Attempts))
	}
	out, r = e.flowJSON(nil, "flow", "resume", "rv", "--skip")
	if out.Run.Status != "done" || r.code != 0 || out.Run.Steps[1].Status != "skipped" || !exists(e.ws+"/last.txt") {
		t.Fatalf("resume --skip: %s (exit %d), step 2 %s", out.Run.Status, r.code, out.Run.Steps[1].Status)
	}
}
