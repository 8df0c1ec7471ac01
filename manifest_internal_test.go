package wtx

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/wtx-dev/wtx/internal/tree"
)

// The manifest Begin wrote is handed to the first read of it, once, and
// only while the file is the one Begin wrote: a manifest replaced since
// (another process's rebase or partial apply) is read from disk.
func TestBeginManifestIsHandedOnceWhileUnreplaced(t *testing.T) {
	ctx := context.Background()
	work, state := t.TempDir(), t.TempDir()
	for _, name := range []string{"a", "b", "c"} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := Open(ctx, work, Options{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()

	st, err := ws.Begin(ctx, BeginOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kept := st.opened.Load()
	if kept == nil {
		t.Fatal("Begin kept no manifest")
	}
	m, err := st.manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m != kept.m {
		t.Fatal("the first read decoded the file instead of taking what Begin wrote")
	}
	if len(m.Entries) != 3 {
		t.Fatalf("%d entries, want 3", len(m.Entries))
	}
	again, err := st.manifest()
	if err != nil {
		t.Fatal(err)
	}
	if again == m {
		t.Fatal("the manifest was handed out twice: a caller's changes to it would reach the next")
	}

	st2, err := ws.Begin(ctx, BeginOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Replaced behind the stage's back: fewer entries, same directory.
	replaced := &tree.Manifest{Entries: m.Entries[:1]}
	if err := writeManifest(ws.stageDir(st2.ID()), replaced); err != nil {
		t.Fatal(err)
	}
	got, err := st2.manifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Entries) != 1 {
		t.Fatalf("read %d entries after the file was replaced, want the 1 on disk", len(got.Entries))
	}
}
