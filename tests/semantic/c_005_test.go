package semantic

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// stageState reads a stage's state and the paths of its change set.
func (e *stateEnv) stageState(tx string) (string, []string) {
	e.t.Helper()
	r := e.must("--json", "status", tx)
	var out struct {
		State   string `json:"state"`
		Changes []struct {
			Path string `json:"path"`
		} `json:"changes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		e.t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	var paths []string
	for _, c := range out.Changes {
		paths = append(paths, c.Path)
	}
	return out.State, paths
}

// crashAfterCommit applies tx (with extra args) in a failpoint build that
// is killed at point, past the commit marker, and checks a journal stays.
func (e *stateEnv) crashAfterCommit(point, tx string, args ...string) {
	e.t.Helper()
	fp := *e
	fp.bin = wtxtest.Binary(e.t, true)
	fp.env = []string{"WTX_FAILPOINT=" + point}
	if r := fp.run(append([]string{"apply", tx}, args...)...); r.code != -1 && r.code != 137 {
		e.t.Fatalf("apply was not killed at %s: %v", point, r)
	}
	if j, _ := filepath.Glob(filepath.Join(e.st, "workspaces", "*", "journal", "*", "journal")); len(j) != 1 {
		e.t.Fatalf("no journal after a crash at %s: %v", point, j)
	}
}

// TestC005_RollForwardSettlesStage checks C-005 (with L-004) for a crash
// after the commit marker: recovery finishes the apply as an uninterrupted
// one would have, the op recorded and the stage settled with it — applied
// when the op covered its whole change set, still open with only the rest
// when it covered part of it — whether recovery runs by 'wtx recover' or
// at the next command. Negative control: with the settling switched off
// (WTX_DISABLE=settle-forward) the stage stays open with the landed change
// still listed, as before.
func TestC005_RollForwardSettlesStage(t *testing.T) {
	t.Parallel()
	t.Run("whole", func(t *testing.T) {
		for _, point := range []string{"apply:committed", "apply:recorded", "apply:settled"} {
			e := newStateEnv(t)
			tx := e.stage("echo x > g1; echo new > a.txt")
			e.crashAfterCommit(point, tx)
			e.must("recover")
			if st, ch := e.stageState(tx); st != "applied" || len(ch) != 0 {
				t.Errorf("%s: stage %s after roll-forward, changes %v; want applied, none", point, st, ch)
			}
			if n := len(e.ops()); n != 1 {
				t.Errorf("%s: %d ops recorded, want 1", point, n)
			}
		}
	})
	t.Run("part", func(t *testing.T) {
		e := newStateEnv(t)
		tx := e.stage("echo x > g1; echo y > g2")
		e.crashAfterCommit("apply:committed", tx, "--path", "g1")
		e.must("list") // recovery at the next command
		if st, ch := e.stageState(tx); st != "open" || len(ch) != 1 || ch[0] != "g2" {
			t.Errorf("stage %s, changes %v after the roll-forward of a partial apply; want open, [g2]", st, ch)
		}
		e.must("apply", tx)
		if st, _ := e.stageState(tx); st != "applied" {
			t.Errorf("stage %s after applying the rest", st)
		}
	})
	t.Run("negative-control", func(t *testing.T) {
		e := newStateEnv(t)
		tx := e.stage("echo x > g1")
		e.crashAfterCommit("apply:committed", tx)
		fp := *e
		fp.bin = wtxtest.Binary(t, true)
		fp.env = []string{"WTX_DISABLE=settle-forward"}
		if r := fp.run("recover"); r.code != 0 {
			t.Fatalf("recover: %v", r)
		}
		if st, ch := e.stageState(tx); st != "open" || len(ch) != 1 {
			t.Errorf("settling switched off, yet stage %s, changes %v: the test cannot tell", st, ch)
		}
	})
}

// ops lists the op ids of wtx log --json.
func (e *stateEnv) ops() []string {
	e.t.Helper()
	r := e.must("--json", "log")
	var out struct {
		Ops []struct {
			ID string `json:"op_id"`
		} `json:"ops"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		e.t.Fatalf("log --json: %v\n%s", err, r.stdout)
	}
	var ids []string
	for _, o := range out.Ops {
		ids = append(ids, o.ID)
	}
	return ids
}
