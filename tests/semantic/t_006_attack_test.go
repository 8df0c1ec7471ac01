package semantic

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// t006RetiredKeyBack makes a receipt key, replaces it with 'receipt key
// new', then puts the old key file back (as a restore from a backup made
// before the new key would). It returns the answer of a run that would
// sign with it, and the fsck findings.
func t006RetiredKeyBack(t *testing.T, sw string) (run wtxResult, findings []fsckFinding, marker string) {
	e := newStateEnv(t)
	appliedOp(e, "a1.txt")
	old, err := os.ReadFile(keyPath(e.st))
	if err != nil {
		t.Fatal(err)
	}
	e.must("receipt", "key", "new")
	if err := os.Remove(keyPath(e.st)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath(e.st), old, 0o600); err != nil {
		t.Fatal(err)
	}
	if sw != "" {
		e = failpointEnv(t, e, sw)
	}
	marker = filepath.Join(t.TempDir(), "ran")
	run = e.run("--json", "run", "--backend", "copy", "--", "sh", "-c", "touch "+marker+"; echo x > x.txt")
	return run, fsckFindings(t, e), marker
}

// TestT_006_AttackRetiredKeyPutBack: a receipt key that 'receipt key new'
// replaced, put back in the key's place, signs nothing: the run that
// would sign with it is refused as io.corrupt before its command runs,
// with the repair that makes a new key, and fsck finds it. Old receipts
// keep verifying with its public half (TestT_006_KeyRotation).
func TestT_006_AttackRetiredKeyPutBack(t *testing.T) {
	t.Parallel()
	run, findings, marker := t006RetiredKeyBack(t, "")
	got := wantCode(t, run, 125, "io.corrupt")
	if !strings.Contains(got.Error.Message, "replaced") || !hasRepair(got, "new-key", "wtx receipt key new") {
		t.Errorf("run with a retired key put back: %q, repairs %+v", got.Error.Message, got.Error.Repairs)
	}
	if _, err := os.Lstat(marker); err == nil {
		t.Error("run with a retired key put back: the command ran")
	}
	wantFsck(t, findings, "key-corrupt", "replaced")
}

// TestT_006_AttackRetiredKeyPutBackNegativeControl: without the check
// (WTX_DISABLE=receipt-key-retired) the old key signs again, and fsck
// finds nothing wrong with it.
func TestT_006_AttackRetiredKeyPutBackNegativeControl(t *testing.T) {
	t.Parallel()
	run, findings, _ := t006RetiredKeyBack(t, "receipt-key-retired")
	if run.code != 0 || len(findings) != 0 {
		t.Fatalf("negative control: run exit %d, fsck %+v\n%s%s", run.code, findings, run.stdout, run.stderr)
	}
}
