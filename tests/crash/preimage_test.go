package crash

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// uncheckpointed stages its change sets with the run's checkpoint off
// (WTX_DISABLE=run-checkpoint), so the blob store lacks the pre-images
// when the apply starts: the apply must store them itself.
var uncheckpointed = []string{"WTX_DISABLE=run-checkpoint"}

// preimageFixtures are the hand-written fixture and a few seeded ones,
// staged uncheckpointed.
func preimageFixtures(t *testing.T) []*fixture {
	fs := []*fixture{newFixedFixtureWith(t, mixedTree(t), mixedScript, uncheckpointed)}
	for seed := uint64(311); seed < 313; seed++ {
		fs = append(fs, newFixtureWith(t, seed, 14, 6, uncheckpointed))
	}
	return fs
}

// preimageCrashes crashes the apply of f's stage at every point from the
// one that writes its journal to its last, lets the next command recover,
// and undoes the op where it landed: the undo must succeed and land the
// before-image, which it can only if every pre-image the apply displaced
// was stored before its journal. It returns the violations and the number
// of undos.
func preimageCrashes(t *testing.T, f *fixture, label string, env []string) (v []string, undos int) {
	names := countApply(t, f, env)
	for k := committedAt(names, "apply:journaled"); k <= len(names)+1; k++ {
		at := fmt.Sprintf("%s, apply crashed at %d/%d", label, k, len(names))
		r, cv := crashApply(f, names, k, env)
		v = append(v, cv...)
		if lr := f.wtx(env, "list"); lr.code != 0 {
			v = append(v, fmt.Sprintf("%s: recovering command failed: %v", at, lr))
			continue
		}
		if f.wantAfterCrash(names, k, r) != f.after {
			continue // rolled back: nothing to undo
		}
		lr := f.wtx(env, "--json", "log")
		op := newestOp(lr.stdout)
		if op == "" {
			v = append(v, fmt.Sprintf("%s: no op in the log after it landed: %v", at, lr))
			continue
		}
		undos++
		if ur := f.wtx(env, "undo", op); ur.code != 0 {
			v = append(v, fmt.Sprintf("%s: undo of the landed op failed: %v", at, ur))
			continue
		}
		v = append(v, f.settled(at+", then undone", f.before)...)
	}
	return v, undos
}

// newestOp returns the id of the newest op of a 'wtx --json log' answer.
func newestOp(out string) string {
	var log struct {
		Ops []struct {
			ID      string    `json:"op_id"`
			Created time.Time `json:"created"`
		} `json:"ops"`
	}
	if json.Unmarshal([]byte(out), &log) != nil {
		return ""
	}
	var id string
	var created time.Time
	for _, op := range log.Ops {
		if op.Created.After(created) {
			id, created = op.ID, op.Created
		}
	}
	return id
}

// TestAppliedOpCanBeUndoneAfterACrash: an apply whose change set's
// pre-images are not in the blob store yet stores them before its journal,
// so wherever it is killed, once it landed (finished by recovery or not
// killed at all) its undo lands the before-image. The fixtures modify,
// delete and change the type of files.
func TestAppliedOpCanBeUndoneAfterACrash(t *testing.T) {
	undos := 0
	for i, f := range preimageFixtures(t) {
		v, n := preimageCrashes(t, f, fmt.Sprintf("fixture %d", i), nil)
		undos += n
		report(t, f, v)
	}
	if undos == 0 {
		t.Fatal("no apply landed")
	}
	t.Logf("%d landed applies undone, most after a crash and a recovery", undos)
}

// TestAppliedOpCanBeUndoneAfterACrashNegativeControl: with the apply not
// storing the pre-images the store lacks (WTX_DISABLE=keep-preimage), the
// same harness must find undos that fail.
func TestAppliedOpCanBeUndoneAfterACrashNegativeControl(t *testing.T) {
	off := []string{"WTX_DISABLE=keep-preimage"}
	var found []string
	for i, f := range preimageFixtures(t)[:2] {
		v, _ := preimageCrashes(t, f, fmt.Sprintf("fixture %d, keep-preimage off", i), off)
		found = append(found, v...)
	}
	if len(found) == 0 {
		t.Fatal("with pre-images not stored the harness found no violation: it cannot tell a kept pre-image from a lost one")
	}
	t.Logf("negative control: %d violations; first: %s", len(found), strings.SplitN(found[0], "\n", 2)[0])
}
