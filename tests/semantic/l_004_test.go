package semantic

import (
	"fmt"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// checkL004 walks stages through their settled states and returns what
// broke L-004: a settled stage that changed state, or an empty run that
// left an open stage behind.
func checkL004(t *testing.T, e *lcEnv) []string {
	var bad []string
	expect := func(what string, cond bool, detail ...any) {
		if !cond {
			bad = append(bad, what+": "+fmt.Sprint(detail...))
		}
	}
	// A run that changes nothing settles its stage as empty.
	a := e.answer(e.must("--json", "run", "--", "true"))
	expect("run with no change", a.State == "empty" && a.Settled, "state ", a.State, " settled ", a.Settled)
	empty := a.Tx
	expect("run with no change", len(e.answer(e.must("--json", "list")).Stages) == 0, "an open stage is left")
	r := e.run("run", "--", "sh", "-c", "exit 3; echo never > n.txt")
	expect("failed run with no change", r.code == 3 && strings.Contains(r.stderr, "settled as empty"), r)
	// --keep keeps it open; begin's stage stays open too.
	kept := e.answer(e.must("--json", "run", "--keep", "--", "true"))
	expect("run --keep", kept.State == "open" && !kept.Settled, "state ", kept.State)
	begun := strings.TrimSpace(e.must("begin").stdout)
	expect("begin", e.stateOf(begun) == "open", "state ", e.stateOf(begun))
	// A run in a named stage leaves it open.
	e.must("run", "--tx", begun, "--", "true")
	expect("run --tx with no change", e.stateOf(begun) == "open", "state ", e.stateOf(begun))
	// The common case needs no stage id: drop --empty clears the empty
	// ones and the one with changes is meant.
	x := e.answer(e.must("--json", "run", "--", "sh", "-c", "echo x > x.txt")).Tx
	r = e.run("diff")
	expect("diff with three open stages", r.code == 1 && strings.Contains(r.stderr, "wtx drop --empty"), r)
	e.must("drop", "--empty")
	st := e.states()
	expect("drop --empty", st[kept.Tx] == "dropped" && st[begun] == "dropped" && st[x] == "open", st)
	e.must("diff")
	e.must("apply")
	expect("apply", e.stateOf(x) == "applied", e.stateOf(x))
	bad = append(bad, checkSettledFinal(t, e, x)...)
	ws := wtxtest.MustSnapshot(t, e.ws)
	// Dropping an empty stage changes nothing: it stays empty.
	e.must("drop", empty)
	expect("drop of an empty stage", e.stateOf(empty) == "empty", "state now ", e.stateOf(empty))
	// Apply of a stage with an empty change set settles it as empty.
	b := strings.TrimSpace(e.must("begin").stdout)
	e.must("apply", b)
	expect("apply of an empty stage", e.stateOf(b) == "empty", "state now ", e.stateOf(b))
	// drop takes several stages, and --all.
	z1 := e.answer(e.must("--json", "run", "--", "sh", "-c", "echo 1 > z1.txt")).Tx
	z2 := e.answer(e.must("--json", "run", "--", "sh", "-c", "echo 2 > z2.txt")).Tx
	e.must("drop", z1, z2)
	st = e.states()
	expect("drop T1 T2", st[z1] == "dropped" && st[z2] == "dropped", st)
	z3 := e.answer(e.must("--json", "run", "--", "sh", "-c", "echo 3 > z3.txt")).Tx
	z4 := strings.TrimSpace(e.must("begin").stdout)
	e.must("drop", "--all")
	st = e.states()
	expect("drop --all", st[z3] == "dropped" && st[z4] == "dropped", st)
	expect("drop --all", wtxtest.MustSnapshot(t, e.ws) == ws, "the workspace changed")
	return bad
}

// checkSettledFinal checks that the applied stage x stays applied when
// dropped, and that a dropped stage stays dropped when applied.
func checkSettledFinal(t *testing.T, e *lcEnv, x string) []string {
	var bad []string
	expect := func(what string, cond bool, detail ...any) {
		if !cond {
			bad = append(bad, what+": "+fmt.Sprint(detail...))
		}
	}
	// Drop of an applied stage is refused; it stays applied and the
	// workspace keeps what landed.
	ws := wtxtest.MustSnapshot(t, e.ws)
	d := e.run("--json", "drop", x)
	expect("drop of an applied stage", d.code != 0 && e.answer(d).Error.Code == "precondition.stage-settled", d)
	expect("drop of an applied stage", e.stateOf(x) == "applied", "state now ", e.stateOf(x))
	expect("drop of an applied stage", wtxtest.MustSnapshot(t, e.ws) == ws, "the workspace changed")
	// Apply of a dropped stage is refused; it stays dropped.
	y := e.answer(e.must("--json", "run", "--", "sh", "-c", "echo y > y.txt")).Tx
	e.must("drop", y)
	ap := e.run("--json", "apply", y)
	expect("apply of a dropped stage", ap.code == 2 && e.answer(ap).Error.Code == "refusal.dropped", ap)
	expect("apply of a dropped stage", e.stateOf(y) == "dropped" && wtxtest.MustSnapshot(t, e.ws) == ws, "state changed or workspace changed")
	return bad
}

// TestL004_SettledIsFinal checks L-004: drop of an applied stage and apply
// of a dropped one are refused and change nothing; a run that changes
// nothing settles its new stage as empty unless --keep (a begun stage and
// a run --tx stay open), an apply of an empty stage settles it, and drop
// takes several stages, --empty and --all.
func TestL004_SettledIsFinal(t *testing.T) {
	t.Parallel()
	e := newLCEnv(t, false)
	for _, v := range checkL004(t, e) {
		t.Error(v)
	}
}

// TestL004_NegativeControlDropRewritesApplied runs the same walk with the
// settled check of drop switched off: it must find the applied stage
// rewritten.
func TestL004_NegativeControlDropRewritesApplied(t *testing.T) {
	t.Parallel()
	e := newLCEnv(t, true, "WTX_DISABLE=settled")
	x := e.answer(e.must("--json", "run", "--", "sh", "-c", "echo x > x.txt")).Tx
	e.must("apply", x)
	bad := checkSettledFinal(t, e, x)
	t.Logf("negative control (settled check off): %d violations", len(bad))
	if len(bad) == 0 {
		t.Fatal("with the settled check switched off nothing broke: the check cannot fail")
	}
}
