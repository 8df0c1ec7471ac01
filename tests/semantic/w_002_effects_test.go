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
	for _, b := range effectsCheck(t) {
		t.Error(b)
	}
}

// TestW002_NegativeControlEffectsRerun lets resume run such a step again
// on its own (WTX_DISABLE=in-doubt): the harness must see it.
func TestW002_NegativeControlEffectsRerun(t *testing.T) {
	bad := effectsCheck(t, "WTX_DISABLE=in-doubt")
	t.Logf("negative control (in-doubt steps re-run): %d violations", len(bad))
	if len(bad) == 0 {
		t.Fatal("with in-doubt steps re-run nothing broke: the harness cannot fail")
	}
}
