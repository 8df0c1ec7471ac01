package wtx

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/wtx-dev/wtx/internal/blob"
)

// TestI002ApplyChecksContentItCopies damages the blobs of an apply right
// after they were stored, before they are copied into the workspace: the
// apply fails with io.corrupt and leaves the workspace as it was (the file
// in an existing directory is written before the steps run, the one in a
// new directory by its step).
func TestI002ApplyChecksContentItCopies(t *testing.T) {
	ctx := context.Background()
	for _, script := range []string{"echo staged > f", "mkdir -p n && echo staged > n/f"} {
		work, state := t.TempDir(), t.TempDir()
		if err := os.WriteFile(filepath.Join(work, "f"), []byte("original\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, work)
		ws, err := Open(ctx, work, Options{StateDir: state})
		if err != nil {
			t.Fatal(err)
		}
		st, err := ws.Begin(ctx, BeginOptions{Backend: "copy"})
		if err != nil {
			t.Fatal(err)
		}
		if res, err := st.Run(ctx, []string{"sh", "-c", script}, RunOptions{}); err != nil || res.ExitCode != 0 {
			t.Fatalf("run: %v, %v", err, res)
		}
		staged := []byte("staged\n")
		testHookStored = func() {
			p := ws.blobs.Path(blob.Sum(staged))
			os.Chmod(p, 0o600)
			if err := os.WriteFile(p, bytes.ToUpper(staged), 0o600); err != nil {
				t.Error(err)
			}
		}
		_, err = st.Apply(ctx, ApplyOptions{})
		testHookStored = nil
		if e := AsError(err); e == nil || e.Code != CodeCorrupt {
			t.Errorf("%s: apply from a damaged blob: want %s, got %v", script, CodeCorrupt, err)
		}
		if got := snapshot(t, work); got != before {
			t.Errorf("%s: a failed apply changed the workspace:\n%s\nwant:\n%s", script, got, before)
		}
		ws.Close()
	}
}
