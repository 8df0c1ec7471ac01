package semantic

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// writeOp stages content at path in stage tx with 'wtx write'.
func writeOp(e *stateEnv, tx, path, content string) {
	e.t.Helper()
	cmd := exec.Command(e.bin, "-C", e.ws, "write", path, "--tx", tx)
	cmd.Env = append(append(os.Environ(), "WTX_STATE_DIR="+e.st), e.env...)
	cmd.Stdin = strings.NewReader(content)
	if out, err := cmd.CombinedOutput(); err != nil {
		e.t.Fatalf("write %q: %v\n%s", path, err, out)
	}
}

const (
	rebBase  = "1\n2\n3\n4\n5\n6\n7\n8\n"
	rebOurs  = "1\nTWO\n3\n4\n5\n6\n7\n8\n"     // the stage's write
	rebTheir = "1\n2\n3\n4\n5\n6\n7\nEIGHT\n"   // the workspace's own change
	rebBoth  = "1\nTWO\n3\n4\n5\n6\n7\nEIGHT\n" // what rebase --merge makes
)

// tx005DropAfterRebase stages writes of a and of a name that is not
// UTF-8 (ops 1, 2) and of k (op 3); the workspace then changes both
// files' last line, and rebase --merge carries the stage onto it. A
// write after the rebase (op 4) is dropped, then op 1. It returns
// drop-op 1's answer and what the workspace holds at a and the odd name
// after the stage is applied.
func tx005DropAfterRebase(t *testing.T, sw string) (drop wtxResult, a, odd string) {
	e := newStateEnv(t)
	for _, p := range []string{"a", oddName} {
		if err := os.WriteFile(filepath.Join(e.ws, p), []byte(rebBase), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if sw != "" {
		e = failpointEnv(t, e, sw)
	}
	var begin struct {
		Tx string `json:"tx"`
	}
	if err := json.Unmarshal([]byte(e.must("--json", "begin", "--backend", "copy").stdout), &begin); err != nil {
		t.Fatal(err)
	}
	tx := begin.Tx
	writeOp(e, tx, "a", rebOurs)
	writeOp(e, tx, oddName, rebOurs)
	writeOp(e, tx, "k", "k\n")
	for _, p := range []string{"a", oddName} {
		if err := os.WriteFile(filepath.Join(e.ws, p), []byte(rebTheir), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.must("rebase", "--merge", tx)
	// An op recorded after the rebase is dropped as any other.
	writeOp(e, tx, "a", "after the rebase\n")
	e.must("drop-op", tx, "4")
	drop = e.run("--json", "drop-op", tx, "1")
	e.must("apply", tx)
	read := func(p string) string {
		data, err := os.ReadFile(filepath.Join(e.ws, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	if _, err := os.Lstat(filepath.Join(e.ws, "k")); err != nil && drop.code != 0 {
		t.Errorf("the refused drop-op took k out of the stage: %v", err)
	}
	return drop, read("a"), read(oddName)
}

// TestTX_005_AttackDropOpAfterRebase: after rebase --merge moved the base
// of a path onto the workspace's own change, drop-op of an op recorded
// before the rebase that touched it is refused (precondition.unsupported)
// with nothing changed: the state it would restore was made on the old
// base, and the stage would then take back the workspace's change, which
// the new base no longer shows as drift. An op recorded after the rebase
// drops as before, and the apply lands the merged files.
func TestTX_005_AttackDropOpAfterRebase(t *testing.T) {
	t.Parallel()
	drop, a, odd := tx005DropAfterRebase(t, "")
	got := wantCode(t, drop, 1, "precondition.unsupported")
	if !strings.Contains(got.Error.Message, "rebase") {
		t.Errorf("drop-op 1 after the rebase: %q", got.Error.Message)
	}
	if a != rebBoth || odd != rebBoth {
		t.Errorf("after the apply the workspace holds a %q and the odd name %q, want both %q", a, odd, rebBoth)
	}
}

// TestTX_005_AttackDropOpAfterRebaseNegativeControl: without the check
// (WTX_DISABLE=drop-op-rebased) drop-op 1 restores what a held before op
// 1, made on the old base, and the apply takes back the workspace's own
// change to it.
func TestTX_005_AttackDropOpAfterRebaseNegativeControl(t *testing.T) {
	t.Parallel()
	drop, a, _ := tx005DropAfterRebase(t, "drop-op-rebased")
	if drop.code != 0 || a != rebBase {
		t.Fatalf("negative control: drop-op exit %d, a %q after the apply\n%s%s", drop.code, a, drop.stdout, drop.stderr)
	}
}
