package semantic

import (
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// TestL007_ApplyOnSuccessRefused checks L-007: a 'run --apply-on-success'
// whose apply is refused (here: a protected path) exits 2, keeps the stage
// for review with the workspace unchanged, prints the not-transactional
// disclaimer and a hint, and its JSON carries CMD's exit status and the
// change set.
func TestL007_ApplyOnSuccessRefused(t *testing.T) {
	t.Parallel()
	e := newLCEnv(t, false)
	before := wtxtest.MustSnapshot(t, e.ws)

	r := e.run("--json", "run", "--apply-on-success", "--protect", "a.txt", "--", "sh", "-c", "echo again > a.txt")
	a := e.answer(r)
	if r.code != 2 || a.Status != "error" || a.Error.Code != "refusal.protected" || a.Error.ExitCode != 2 {
		t.Errorf("--json run --apply-on-success refused: exit %d, status %q, code %q, error.exit_code %d; want 2, error, refusal.protected, 2\n%s",
			r.code, a.Status, a.Error.Code, a.Error.ExitCode, r)
	}
	if a.ExitCode == nil || *a.ExitCode != 0 {
		t.Errorf("the JSON does not carry CMD's exit status 0: %v\n%s", a.ExitCode, r.stdout)
	}
	if len(a.Changes) != 1 || a.Changes[0].Path != "a.txt" || a.Changes[0].Action != "modified" {
		t.Errorf("the JSON does not carry the change set (a.txt modified): %+v", a.Changes)
	}
	if len(a.NotTransactional) == 0 || a.Tx == "" {
		t.Errorf("the JSON lacks not_transactional or tx: %s", r.stdout)
	}
	if got := e.stateOf(a.Tx); got != "open" {
		t.Errorf("the refused stage is %s, want open (kept for review)", got)
	}

	r = e.run("run", "--apply-on-success", "--protect", "b.txt", "--", "sh", "-c", "echo again > b.txt")
	if r.code != 2 {
		t.Errorf("run --apply-on-success refused: exit %d, want 2\n%s", r.code, r)
	}
	for _, want := range []string{"wtx: not transactional: ", "wtx: error: ", "wtx: hint: ", "protected"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if after := wtxtest.MustSnapshot(t, e.ws); after != before {
		t.Error("a refused --apply-on-success changed the workspace")
	}
	// The kept stages apply once approved.
	for _, tx := range []string{a.Tx} {
		e.must("apply", tx, "--approve")
	}
}
