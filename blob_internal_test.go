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
		testHookStoredDamages = true
		_, err = st.Apply(ctx, ApplyOptions{})
		testHookStored, testHookStoredDamages = nil, false
		if e := AsError(err); e == nil || e.Code != CodeCorrupt {
			t.Errorf("%s: apply from a damaged blob: want %s, got %v", script, CodeCorrupt, err)
		}
		if got := snapshot(t, work); got != before {
			t.Errorf("%s: a failed apply changed the workspace:\n%s\nwant:\n%s", script, got, before)
		}
		ws.Close()
	}
}

// TestApplyLandsWhatItHashed damages the blobs of an apply right after
// they were stored, as TestI002ApplyChecksContentItCopies does, but lets
// the apply write its temporary files from the payloads it read and hashed
// itself: what lands is the staged content, never the damaged object's.
func TestApplyLandsWhatItHashed(t *testing.T) {
	ctx := context.Background()
	for _, script := range []string{"echo staged > f", "mkdir -p n && echo staged > n/f"} {
		work, state := t.TempDir(), t.TempDir()
		if err := os.WriteFile(filepath.Join(work, "f"), []byte("original\n"), 0o644); err != nil {
			t.Fatal(err)
		}
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
		if err != nil {
			t.Fatalf("%s: apply: %v", script, err)
		}
		target := "f"
		if script != "echo staged > f" {
			target = "n/f"
		}
		got, err := os.ReadFile(filepath.Join(work, target))
		if err != nil || !bytes.Equal(got, staged) {
			t.Errorf("%s: %s holds %q (%v), want %q", script, target, got, err, staged)
		}
		ws.Close()
	}
}
