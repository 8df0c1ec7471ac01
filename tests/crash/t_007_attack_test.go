package crash

import (
	"encoding/json"
	"fmt"
	"testing"
)

// t007SettledBy leaves a write pending (killed at left: before its change,
// so that settling rolls it back, or after, so that settling finishes it),
// then runs settler (fork, or drop-op of the pending op) killed at its
// n-th crash point, for n = 1 up to the first run that is not killed, and
// settler once more whole. Every stage of the workspace must then hold
// what its recorded ops describe. It returns the violations.
func t007SettledBy(t *testing.T, env []string, left string, settler []string) (v []string) {
	for n := 1; ; n++ {
		e, ok := newPFEnv(t, "copy", env, map[string]string{"keep.txt": "keep\n", "a.txt": "a\n"})
		if !ok {
			t.Skip("the copy backend cannot stage here")
		}
		if r := e.wtx(nil, "one\n", "write", "--tx", e.tx, "a.txt"); r.code != 0 {
			t.Fatalf("write: %v", r)
		}
		r := e.exec([]string{e.bin, "-C", e.ws, "write", "--tx", e.tx, "n/d/b.txt"}, "two\n", "WTX_FAILPOINT="+left)
		if !r.killed {
			t.Fatalf("the write was not killed at %s: %v", left, r)
		}
		args := []string{}
		for _, a := range settler {
			if a == "TX" {
				a = e.tx
			}
			args = append(args, a)
		}
		label := fmt.Sprintf("write killed at %s, %v killed at crash point %d", left, settler, n)
		killed := e.wtx(&killPoint{call: "failpoint", n: n}, "", args...).killed
		_ = e.wtx(nil, "", args...) // once more whole; a drop-op that landed finds no op 2 and says so
		lr := e.wtx(nil, "", "--json", "list")
		var list struct {
			Stages []struct {
				Tx string `json:"tx"`
			} `json:"stages"`
		}
		if lr.code != 0 || json.Unmarshal([]byte(lr.stdout), &list) != nil {
			t.Fatalf("list: %v", lr)
		}
		for _, s := range list.Stages {
			v = append(v, described(label+", stage "+s.Tx, e.base, e.status(s.Tx))...)
		}
		if !killed {
			t.Logf("write killed at %s: %v passed %d crash points", left, settler, n-1)
			return v
		}
	}
}

// TestT_007_AttackPendingOpSettledByForkOrDropOp: a write killed before
// or after its change is settled by a fork of its stage, or taken back by
// drop-op, each itself killed at every crash point it passes: the stage
// and every fork of it hold exactly what their recorded ops describe.
func TestT_007_AttackPendingOpSettledByForkOrDropOp(t *testing.T) {
	t.Parallel()
	var v []string
	for _, left := range []string{"fileop:intent", "fileop:changed"} {
		for _, settler := range [][]string{{"fork", "TX"}, {"drop-op", "TX", "2"}} {
			v = append(v, t007SettledBy(t, nil, left, settler)...)
		}
	}
	reportAll(t, v)
}

// TestT_007_AttackPendingOpSettledByForkNegativeControl: when the write
// changes the view before it records its op (WTX_DISABLE=fileop-intent),
// its kill leaves content no op records, and the fork carries it on.
func TestT_007_AttackPendingOpSettledByForkNegativeControl(t *testing.T) {
	t.Parallel()
	if v := t007SettledBy(t, []string{"WTX_DISABLE=fileop-intent"}, "fileop:changed", []string{"fork", "TX"}); len(v) == 0 {
		t.Fatal("negative control: with the intent off, the fork of a killed write holds only what its ops describe")
	}
}
