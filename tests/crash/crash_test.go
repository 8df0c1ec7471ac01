// Package crash proves the crash safety of wtx applies and undos with the
// failpoint build of the binary: every crash point of an apply is hit by a
// SIGKILL in turn, the next wtx command recovers, and the workspace must be
// exactly the before-image or exactly the after-image of the change set,
// with no temporary debris and no journal left (C-005, S-STAGE-013). The
// recovery is crashed at each of its own points too (compound crashes), a
// negative control with the journal switched off must find violations, and
// the promise tests named by their ids (S-STAGE-013, C-004, C-005, TX-007)
// check what the specification says of each.
//
// WTX_SOAK=1 raises the number of change sets of every harness here.
package crash

import (
	"fmt"
	"strings"
	"testing"
)

// crashApply restores f, applies its stage with a crash at point k of names
// (the points of an uncrashed apply) and env added, and returns the apply's
// result and the violations seen so far.
func crashApply(f *fixture, names []string, k int, env []string) (result, []string) {
	label := fmt.Sprintf("apply crashed at point %d/%d", k, len(names))
	if k <= len(names) {
		label += " (" + names[k-1] + ")"
	}
	f.restore()
	r := f.wtx(append(fp(k), env...), "apply", f.stage)
	v := expectKilled(label, k, len(names), r)
	if !r.killed {
		if r.code != 0 {
			v = append(v, fmt.Sprintf("%s: apply failed: %v", label, r))
		} else if got := f.snapshot(); got != f.after {
			v = append(v, fmt.Sprintf("%s: apply reported success but the workspace is not the after-image:\n%s", label, diffLines(f.after, got)))
		}
	}
	return r, v
}

// wantAfterCrash is the image a crash at point k must recover to: the
// after-image once the commit marker is durable (or the apply finished),
// the before-image until then.
func (f *fixture) wantAfterCrash(names []string, k int, r result) string {
	if k >= committedAt(names, "apply:committed") || (!r.killed && r.code == 0) {
		return f.after
	}
	return f.before
}

// recoverAndFinish runs a plain wtx command (which recovers), checks the
// workspace against want, then applies the stage again and checks that it
// lands the after-image.
func recoverAndFinish(f *fixture, label, want string) []string {
	var v []string
	if r := f.wtx(nil, "list"); r.code != 0 || r.killed {
		v = append(v, fmt.Sprintf("%s: recovering command failed: %v", label, r))
	}
	v = append(v, f.settled(label, want)...)
	if r := f.wtx(nil, "apply", f.stage); r.code != 0 || r.killed {
		v = append(v, fmt.Sprintf("%s: a later apply failed: %v", label, r))
	}
	return append(v, f.settled(label+", then applied again", f.after)...)
}

// countApply counts the crash points of an uncrashed apply of f's stage
// and checks that it lands the after-image.
func countApply(t *testing.T, f *fixture, env []string) []string {
	t.Helper()
	f.restore()
	names, r := f.points(env, "apply", f.stage)
	if r.code != 0 || r.killed {
		t.Fatalf("uncrashed apply: %v\nscript:\n%s", r, f.script)
	}
	if got := f.snapshot(); got != f.after {
		t.Fatalf("uncrashed apply did not land the after-image:\n%s\nscript:\n%s", diffLines(f.after, got), f.script)
	}
	if len(names) == 0 {
		t.Fatal("the apply hit no crash point: is the binary built with -tags wtxfailpoint?")
	}
	return names
}

func changeSets(normal, long int) int {
	if soak() {
		return long
	}
	return normal
}

// TestCrashAtEveryPoint crashes the apply of each random change set at
// every one of its crash points and checks the recovery (C-005, L2).
func TestCrashAtEveryPoint(t *testing.T) {
	n := changeSets(5, 1000)
	var tl tally
	t.Run("sets", func(t *testing.T) {
		for seed := 1; seed <= n; seed++ {
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				t.Parallel()
				f := newFixture(t, uint64(seed), 14, 6)
				names := countApply(t, f, nil)
				var v []string
				for k := 1; k <= len(names)+1; k++ {
					r, cv := crashApply(f, names, k, nil)
					v = append(v, cv...)
					label := fmt.Sprintf("seed %d, apply crashed at %d/%d", seed, k, len(names))
					v = append(v, recoverAndFinish(f, label, f.wantAfterCrash(names, k, r))...)
					if r.killed {
						tl.crashes.Add(1)
					}
				}
				tl.changeSets.Add(1)
				tl.add(v)
				report(t, f, v)
			})
		}
	})
	t.Logf("crash at every point: %d change sets, %d crash points exercised, %d violations",
		tl.changeSets.Load(), tl.crashes.Load(), tl.violations.Load())
}

// TestCrashRecoveryAtEveryPoint crashes an apply at each of its points,
// then crashes the recovering command at each of its own points, and
// recovers again (compound crashes).
func TestCrashRecoveryAtEveryPoint(t *testing.T) {
	n := changeSets(2, 200)
	var tl tally
	t.Run("sets", func(t *testing.T) {
		for seed := 101; seed < 101+n; seed++ {
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				t.Parallel()
				f := newFixture(t, uint64(seed), 12, 5)
				names := countApply(t, f, nil)
				var v []string
				for k := 1; k <= len(names); k++ {
					for m := 1; ; m++ {
						r, cv := crashApply(f, names, k, nil)
						v = append(v, cv...)
						tl.crashes.Add(1)
						label := fmt.Sprintf("seed %d, apply crashed at %d/%d, recovery crashed at %d", seed, k, len(names), m)
						rr := f.wtx(fp(m), "list")
						if rr.killed {
							tl.recoveryCrashes.Add(1)
							v = append(v, recoverAndFinish(f, label, f.wantAfterCrash(names, k, r))...)
							continue
						}
						if rr.code != 0 {
							v = append(v, fmt.Sprintf("%s: recovering command failed: %v", label, rr))
						}
						v = append(v, f.settled(label+" (past its last point)", f.wantAfterCrash(names, k, r))...)
						break
					}
				}
				tl.changeSets.Add(1)
				tl.add(v)
				report(t, f, v)
			})
		}
	})
	t.Logf("compound crashes: %d change sets, %d apply crashes, %d recovery crashes, %d violations",
		tl.changeSets.Load(), tl.crashes.Load(), tl.recoveryCrashes.Load(), tl.violations.Load())
}

// TestCrashHarnessNegativeControl runs the harness with the write-ahead
// journal switched off: it must find violations, which proves it can.
func TestCrashHarnessNegativeControl(t *testing.T) {
	off := []string{"WTX_DISABLE=journal"}
	var tl tally
	for seed := 201; seed < 204; seed++ {
		f := newFixture(t, uint64(seed), 14, 6)
		names := countApply(t, f, off)
		for k := 1; k <= len(names); k++ {
			r, v := crashApply(f, names, k, off)
			tl.crashes.Add(1)
			label := fmt.Sprintf("seed %d, journal off, crashed at %d/%d", seed, k, len(names))
			tl.add(append(v, recoverAndFinish(f, label, f.wantAfterCrash(names, k, r))...))
		}
		tl.changeSets.Add(1)
		if tl.violations.Load() > 0 {
			break // the control has shown its teeth
		}
	}
	t.Logf("negative control (journal off): %d change sets, %d crash points, %d violations found",
		tl.changeSets.Load(), tl.crashes.Load(), tl.violations.Load())
	if tl.violations.Load() == 0 {
		t.Fatal("with the journal switched off the harness found no violation: it cannot detect a torn apply")
	}
	t.Logf("first violation found: %s", strings.SplitN(tl.first[0], "\n", 2)[0])
}

// report fails t with the first few violations of one change set.
func report(t *testing.T, f *fixture, v []string) {
	t.Helper()
	if len(v) == 0 {
		return
	}
	if len(v) > 3 {
		v = append(v[:3:3], fmt.Sprintf("... and %d more", len(v)-3))
	}
	t.Errorf("%d violation(s):\n%s\nscript:\n%s", len(v), strings.Join(v, "\n"), f.script)
}
