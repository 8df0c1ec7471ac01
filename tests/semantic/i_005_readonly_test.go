package semantic

import (
	"os/exec"
	"strings"
	"testing"
)

// TestI005FsckReadOnlyStateRoot checks I-005 and the state root's error
// codes: wtx fsck of a sound state root on a read-only mount answers
// io.read-only; it never reports the database as damaged, which would offer
// 'wtx fsck --reinit' (setting a sound history aside) as the repair.
func TestI005FsckReadOnlyStateRoot(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t)
	if r := e.runIn(e.ws, nil, "run", "--backend", "copy", "--", "sh", "-c", "echo b > a.txt"); r.code != 0 {
		t.Fatalf("wtx run: %v", r)
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare: cannot make a read-only mount here")
	}
	ro := `mount --bind "$0" "$0" && mount -o remount,bind,ro "$0"`
	if out, err := exec.Command(unshare, "-rm", "sh", "-c", ro, e.st).CombinedOutput(); err != nil {
		t.Skipf("no user and mount namespace for a read-only mount here (%v: %s)", err, out)
	}
	prefix := []string{unshare, "-rm", "sh", "-c", ro + ` && exec "$@"`, e.st}
	r := e.runIn(e.ws, prefix, "--json", "fsck")
	if r.code == 0 || !strings.Contains(r.stdout, `"io.read-only"`) {
		t.Errorf("wtx fsck on a read-only state root: want io.read-only, got %v", r)
	}
	if strings.Contains(r.stdout, "database-corrupt") || strings.Contains(r.stdout, "--reinit") {
		t.Errorf("wtx fsck called a sound database on a read-only mount damaged: %v", r)
	}
	if r := e.runIn(e.ws, nil, "fsck"); r.code != 0 {
		t.Errorf("wtx fsck of the same state root, writable: %v", r)
	}
}
