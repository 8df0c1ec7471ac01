package wtx

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/wtx-dev/wtx/internal/tree"
	"github.com/wtx-dev/wtx/internal/wtxtest"
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
	if err := ws.writeManifest(st2.ID(), replaced); err != nil {
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

// The size hint is taken only from a small regular file written for the
// same selectors; anything else is no hint, and reading it never waits.
func TestSizeHintIsOnlyAHint(t *testing.T) {
	ctx := context.Background()
	work, state := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "a"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := Open(ctx, work, Options{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	key := sizeHintKey(nil, nil)
	other, err := tree.ParseSelectors([]string{"build/"})
	if err != nil {
		t.Fatal(err)
	}
	if otherKey := sizeHintKey(other, nil); otherKey == key || sizeHintKey(nil, other) == otherKey {
		t.Fatal("different selectors share a key")
	}
	if _, err := ws.Begin(ctx, BeginOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := ws.sizeHint(key); got != 1 {
		t.Fatalf("after a stage of 1 entry the hint is %d", got)
	}
	if got := ws.sizeHint(sizeHintKey(other, nil)); got != 0 {
		t.Fatalf("a stage with other selectors took the hint %d", got)
	}

	p := filepath.Join(ws.workspaceStateDir(), sizeHintName)
	big := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(big, []byte("123 "+key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		plant func() error
	}{
		{"garbage", func() error { return os.WriteFile(p, []byte("x y\n"), 0o600) }},
		{"negative", func() error { return os.WriteFile(p, []byte("-5 "+key+"\n"), 0o600) }},
		{"too long", func() error {
			return os.WriteFile(p, []byte("12 "+key+"                                                   \n"), 0o600)
		}},
		{"symlink", func() error { return os.Symlink(big, p) }},
		{"fifo", func() error { return syscall.Mkfifo(p, 0o600) }},
		{"directory", func() error { return os.Mkdir(p, 0o700) }},
	} {
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
		if err := c.plant(); err != nil {
			t.Fatal(err)
		}
		done := make(chan int, 1)
		go func() { done <- ws.sizeHint(key) }()
		select {
		case got := <-done:
			if got != 0 {
				t.Errorf("%s: hint %d, want none", c.name, got)
			}
		case <-time.After(wtxtest.Patience(t)):
			t.Fatalf("%s: reading the hint did not return", c.name)
		}
	}
}
