package crash

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/journal"
)

// TestI_002_RecoveryRefusesDamagedPreImage crashes an apply that removes a
// directory once it has unlinked the directory's file (whose pre-image then
// lives only in the blob store), damages that pre-image in the store (same
// size), and recovers: the recovery must not succeed and must not write the
// damaged bytes; once the object is whole again, recovery restores the
// before-image.
func TestI_002_RecoveryRefusesDamagedPreImage(t *testing.T) {
	content := []byte("only the blob store keeps me\n")
	f := newFixedFixture(t, func(ws string) {
		mustDo(t, os.Mkdir(filepath.Join(ws, "d"), 0o755))
		mustDo(t, os.WriteFile(filepath.Join(ws, "d", "x"), content, 0o644))
		mustDo(t, os.WriteFile(filepath.Join(ws, "keep"), []byte("k\n"), 0o644))
	}, "rm -rf d\necho changed > keep\n")
	names := countApply(t, f, nil)
	sum := sha256.Sum256(content)
	h := hex.EncodeToString(sum[:])
	obj := filepath.Join(f.st, "objects", h[:2], h[2:])
	bad := bytes.ToUpper(content)
	tried := 0
	for k := 1; k <= len(names) && tried < 2; k++ {
		r, _ := crashApply(f, names, k, nil)
		if !r.killed {
			continue
		}
		if _, err := os.Lstat(filepath.Join(f.ws, "d", "x")); err == nil {
			continue // not unlinked yet
		}
		if aside, _ := filepath.Glob(filepath.Join(f.ws, "d", ".wtx-tmp-*")); len(aside) > 0 {
			continue // moved aside, not unlinked: recovery renames it back
		}
		ops := f.pending()
		if len(ops) != 1 {
			continue
		}
		if _, committed, err := journal.Load(f.journalDir(), ops[0]); err != nil || committed {
			continue // rolled forward: the pre-image is not needed
		}
		tried++
		label := fmt.Sprintf("killed at %d (%s)", k, names[k-1])
		mustDo(t, os.Chmod(obj, 0o600))
		mustDo(t, os.WriteFile(obj, bad, 0o600))
		rr := f.wtx(nil, "--json", "recover")
		if rr.code == 0 {
			t.Errorf("%s: recovery from a damaged pre-image succeeded: %v", label, rr)
		}
		if !strings.Contains(rr.stdout+rr.stderr, "corrupt") {
			t.Errorf("%s: recovery does not say the pre-image is damaged: %v", label, rr)
		}
		if got, err := os.ReadFile(filepath.Join(f.ws, "d", "x")); err == nil && bytes.Equal(got, bad) {
			t.Errorf("%s: recovery wrote the damaged pre-image into the workspace", label)
		}
		if len(f.pending()) == 0 {
			t.Errorf("%s: the journal is gone though the rollback could not finish", label)
		}
		mustDo(t, os.WriteFile(obj, content, 0o400))
		if rr := f.wtx(nil, "recover"); rr.code != 0 {
			t.Errorf("%s: recovery once the object is whole: %v", label, rr)
		}
		for _, v := range f.settled(label+", object repaired", f.before) {
			t.Error(v)
		}
	}
	t.Logf("damaged pre-image at recovery: %d crash points", tried)
	if tried == 0 {
		t.Fatalf("no crash point left d/x unlinked with the apply uncommitted (points: %v)", names)
	}
}
