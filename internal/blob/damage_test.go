//go:build unix

package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// contentWithPrefix returns content whose digest starts with the hex
// digits p, and its digest.
func contentWithPrefix(t *testing.T, p string) ([]byte, Digest) {
	t.Helper()
	for i := range 1 << 20 {
		data := fmt.Appendf(nil, "content %d\n", i)
		if d := Sum(data); strings.HasPrefix(d.Hex(), p) {
			return data, d
		}
	}
	t.Fatalf("no content with digest prefix %s", p)
	return nil, ""
}

// outside makes a directory beside the store's with one file in it, and
// returns it with a function that fails the test if anything in it changed.
func outside(t *testing.T, s *Store) (string, func()) {
	t.Helper()
	dir := filepath.Join(filepath.Dir(s.Dir()), "outside-"+filepath.Base(s.Dir()))
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(dir, strings.Repeat("0", 62))
	if err := os.WriteFile(victim, []byte("victim"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(victim, old, old); err != nil {
		t.Fatal(err)
	}
	return dir, func() {
		t.Helper()
		names, err := os.ReadDir(dir)
		if err != nil || len(names) != 1 {
			t.Errorf("the directory outside the store changed: %v %v", names, err)
		}
		if got, err := os.ReadFile(victim); err != nil || string(got) != "victim" {
			t.Errorf("the file outside the store changed: %q %v", got, err)
		}
	}
}

// TestPrefixLinkIsDamage plants a symlink where the store keeps a prefix
// directory, pointing outside. Every operation that would go through it
// fails with ErrDamaged, and nothing outside is created, read as an object
// or removed.
func TestPrefixLinkIsDamage(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	dir, check := outside(t, s)
	if err := os.Symlink(dir, filepath.Join(s.Dir(), "objects", "00")); err != nil {
		t.Fatal(err)
	}
	data, d := contentWithPrefix(t, "00")
	victim := Digest(prefix + "00" + strings.Repeat("0", 62))
	if _, err := s.PutBytes(ctx, data); !errors.Is(err, ErrDamaged) {
		t.Errorf("Put through the link: %v, want ErrDamaged", err)
	}
	b := s.NewBatch()
	if _, _, err := b.Put(ctx, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); !errors.Is(err, ErrDamaged) {
		t.Errorf("a batch's commit through the link: %v, want ErrDamaged", err)
	}
	if _, err := s.ReadAll(victim); !errors.Is(err, ErrDamaged) {
		t.Errorf("ReadAll through the link: %v, want ErrDamaged", err)
	}
	if s.Has(victim) || s.Has(d) {
		t.Error("Has saw an object through the link")
	}
	if err := s.Remove(victim); !errors.Is(err, ErrDamaged) {
		t.Errorf("Remove through the link: %v, want ErrDamaged", err)
	}
	if err := s.Walk(ctx, func(Digest, int64) error { return nil }); !errors.Is(err, ErrDamaged) {
		t.Errorf("Walk over the link: %v, want ErrDamaged", err)
	}
	check()
	if left := tmpEntries(t, s); len(left) != 0 {
		t.Errorf("tmp not empty: %v", left)
	}
}

// TestObjectLinkIsDamage plants a symlink in place of an object: a read
// refuses it (never reading its target), and storing the content again
// replaces the link with the object.
func TestObjectLinkIsDamage(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	dir, check := outside(t, s)
	data, d := contentWithPrefix(t, "ab")
	if err := os.MkdirAll(filepath.Join(s.Dir(), "objects", "ab"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, strings.Repeat("0", 62)), s.Path(d)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadAll(d); !errors.Is(err, ErrDamaged) {
		t.Errorf("ReadAll of a link: %v, want ErrDamaged", err)
	}
	if f, err := s.Open(d); !errors.Is(err, ErrDamaged) {
		t.Errorf("Open of a link: %v, want ErrDamaged", err)
		if f != nil {
			f.Close()
		}
	}
	if s.Has(d) {
		t.Error("Has took a link for an object")
	}
	if _, err := s.PutBytes(ctx, data); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(d); err != nil {
		t.Errorf("the object stored over the link: %v", err)
	}
	check()
}

// TestLockLinkIsDamage plants a symlink, dangling, in place of the store
// lock: Lock refuses it and creates nothing at its target.
func TestLockLinkIsDamage(t *testing.T) {
	s := newStore(t)
	target := filepath.Join(filepath.Dir(s.Dir()), "made-by-lock")
	if err := os.Symlink(target, filepath.Join(s.Dir(), lockName)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lock(context.Background(), Shared, time.Now().Add(time.Second)); !errors.Is(err, ErrDamaged) {
		t.Errorf("Lock through a link: %v, want ErrDamaged", err)
	}
	if _, err := os.Lstat(target); err == nil {
		t.Error("the lock's link target was created")
	}
}

// TestPrefixDirRemovedWhileOpen removes a prefix directory the store holds
// open: a read finds the object missing, and a put makes the directory
// again and stores into it.
func TestPrefixDirRemovedWhileOpen(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	data, d := contentWithPrefix(t, "cd")
	if _, err := s.PutBytes(ctx, data); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(s.Dir(), "objects", "cd")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadAll(d); !errors.Is(err, ErrMissing) {
		t.Errorf("ReadAll after its directory went: %v, want ErrMissing", err)
	}
	if _, err := s.PutBytes(ctx, data); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(d); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Path(d)); err != nil {
		t.Errorf("the object is not at its path: %v", err)
	}
}
