package semantic

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// completedThenDamaged stages three additions, applies them in a failpoint
// build killed after every step ran and before the commit marker (so no
// temporary file is left, and no marker), damages the journal, and returns
// the stage and the journal's path.
func (e *stateEnv) completedThenDamaged() (tx, journalPath string) {
	e.t.Helper()
	tx = e.stage("echo 1 > n1; echo 2 > n2; echo 3 > n3")
	fp := *e
	fp.bin = wtxtest.Binary(e.t, true)
	fp.env = []string{"WTX_FAILPOINT=apply:synced"}
	if r := fp.run("apply", tx); r.code != -1 && r.code != 137 {
		e.t.Fatalf("apply was not killed at the failpoint: %v", r)
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		if _, err := os.Stat(filepath.Join(e.ws, n)); err != nil {
			e.t.Fatalf("the killed apply did not write %s (every step should have run): %v", n, err)
		}
	}
	if temps, _ := filepath.Glob(filepath.Join(e.ws, ".wtx-tmp-*")); len(temps) != 0 {
		e.t.Fatalf("the apply left temporary files %v: the case needs none", temps)
	}
	journals, _ := filepath.Glob(filepath.Join(e.st, "workspaces", "*", "journal", "*", "journal"))
	if len(journals) != 1 {
		e.t.Fatalf("journals: %v", journals)
	}
	b, err := os.ReadFile(journals[0])
	if err != nil {
		e.t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(journals[0], b, 0o600); err != nil {
		e.t.Fatal(err)
	}
	return tx, journals[0]
}

// TestI005_DamagedJournalAfterCompletedApply checks I-005 (and C-005's
// "never claims before when it is after") for a damaged journal of an apply
// whose steps all ran: it leaves no temporary file and no commit marker,
// but its paths hold their staged content. wtx never says nothing of it
// reached the workspace: recovery refuses with refusal.interrupted-apply
// naming the stage and the paths, keeps the journal, and so does every
// command, until a person sets it aside (into lost+found); an apply of the
// stage then settles it without writing anything again. Negative control:
// with the comparison against the stages switched off (failpoint build,
// WTX_DISABLE=journal-evidence) recovery claims nothing reached the
// workspace, as it did before.
func TestI005_DamagedJournalAfterCompletedApply(t *testing.T) {
	t.Parallel()
	t.Run("refused", func(t *testing.T) {
		e := newStateEnv(t)
		tx, journal := e.completedThenDamaged()
		op := filepath.Base(filepath.Dir(journal))
		r := e.run("--json", "recover")
		got := wantCode(t, r, 2, "refusal.interrupted-apply")
		for _, want := range []string{tx, "n1", "staged content"} {
			if !strings.Contains(got.Error.Message, want) {
				t.Errorf("recover's message lacks %q: %s", want, got.Error.Message)
			}
		}
		if strings.Contains(r.stdout, "nothing of it reached") {
			t.Errorf("recover says nothing reached the workspace: %s", r.stdout)
		}
		if _, err := os.Stat(journal); err != nil {
			t.Fatalf("the damaged journal is gone: %v", err)
		}
		wantCode(t, e.run("--json", "list"), 2, "refusal.interrupted-apply")
		e.must("recover", "--set-aside", op)
		if kept, _ := filepath.Glob(filepath.Join(e.st, "lost+found", "journal-*"+op+"*", "journal")); len(kept) != 1 {
			t.Errorf("the journal was not kept in lost+found: %v", kept)
		}
		before := snapshotTree(t, e.ws)
		e.must("apply", tx)
		if after := snapshotTree(t, e.ws); after != before {
			t.Errorf("the apply after set-aside changed the workspace:\n%s\n---\n%s", before, after)
		}
		if st, ch := e.stageState(tx); st != "applied" || len(ch) != 0 {
			t.Errorf("stage %s, changes %v; want applied, none", st, ch)
		}
	})
	t.Run("untouched-stage-verified", func(t *testing.T) {
		// The same damage with the paths put back: nothing of the apply
		// is in the workspace, and recovery may say so.
		e := newStateEnv(t)
		_, journal := e.completedThenDamaged()
		for _, n := range []string{"n1", "n2", "n3"} {
			os.Remove(filepath.Join(e.ws, n))
		}
		r := e.must("recover")
		if !strings.Contains(r.stdout, "set aside") {
			t.Errorf("recover does not set the journal aside: %v", r)
		}
		if _, err := os.Stat(journal); err == nil {
			t.Error("the journal is still in place")
		}
	})
	t.Run("negative-control", func(t *testing.T) {
		e := newStateEnv(t)
		e.completedThenDamaged()
		fp := *e
		fp.bin = wtxtest.Binary(t, true)
		fp.env = []string{"WTX_DISABLE=journal-evidence"}
		if r := fp.run("recover"); r.code != 0 || !strings.Contains(r.stdout, "nothing of it reached") {
			t.Errorf("with the comparison off, recovery should claim nothing reached the workspace (the test cannot tell otherwise): %v", r)
		}
	})
}
