package blob

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

func newStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// tmpEntries lists what is left in the store's tmp directory.
func tmpEntries(t *testing.T, s *Store) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(s.Dir(), "tmp"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// objectCount counts the object files under objects/.
func objectCount(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(filepath.Join(s.Dir(), "objects"), func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestOpenCreatesLayout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	if _, err := Open(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open of a missing directory: %v, want fs.ErrNotExist", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Dir() != dir {
		t.Errorf("Dir() = %q, want %q", s.Dir(), dir)
	}
	for _, sub := range []string{"objects", "tmp"} {
		fi, err := os.Stat(filepath.Join(dir, sub))
		if err != nil || !fi.IsDir() {
			t.Errorf("%s: not a directory: %v", sub, err)
		}
	}
	if _, err := Open(dir); err != nil {
		t.Errorf("re-open: %v", err)
	}
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", []byte{}},
		{"small", []byte("hello, wtx\n")},
		{"binary", []byte{0, 1, 2, 0xff, 0xfe, 0}},
		{"large", big},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, n, err := s.Put(ctx, bytes.NewReader(tt.data))
			if err != nil {
				t.Fatal(err)
			}
			if want := Sum(tt.data); d != want {
				t.Fatalf("Put digest = %s, want %s", d, want)
			}
			if n != int64(len(tt.data)) {
				t.Fatalf("Put size = %d, want %d", n, len(tt.data))
			}
			if !s.Has(d) {
				t.Fatal("Has = false after Put")
			}
			want := filepath.Join(s.Dir(), "objects", d.Hex()[:2], d.Hex()[2:])
			if s.Path(d) != want {
				t.Fatalf("Path = %q, want %q", s.Path(d), want)
			}
			fi, err := os.Lstat(want)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o400 {
				t.Errorf("object mode = %v, want 0400", fi.Mode().Perm())
			}
			got, err := s.ReadAll(d)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tt.data) {
				t.Fatalf("ReadAll returned %d bytes, want %d", len(got), len(tt.data))
			}
			f, err := s.Open(d)
			if err != nil {
				t.Fatal(err)
			}
			got, err = io.ReadAll(f)
			f.Close()
			if err != nil || !bytes.Equal(got, tt.data) {
				t.Fatalf("Open+ReadAll: %d bytes, err %v", len(got), err)
			}
			if err := s.Verify(d); err != nil {
				t.Fatalf("Verify: %v", err)
			}
		})
	}
	if left := tmpEntries(t, s); len(left) != 0 {
		t.Errorf("tmp not empty after puts: %v", left)
	}
}

func TestPutDedup(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	d1, err := s.PutBytes(ctx, []byte("same"))
	if err != nil {
		t.Fatal(err)
	}
	fi1, err := os.Stat(s.Path(d1))
	if err != nil {
		t.Fatal(err)
	}
	d2, err := s.PutBytes(ctx, []byte("same"))
	if err != nil {
		t.Fatal(err)
	}
	if d1 != d2 {
		t.Fatalf("digests differ: %s, %s", d1, d2)
	}
	fi2, err := os.Stat(s.Path(d2))
	if err != nil {
		t.Fatal(err)
	}
	if os.SameFile(fi1, fi2) {
		// A reused object is stored afresh: a damaged one heals and the
		// grace period of a collector starts again.
		t.Error("second Put left the existing object's file in place")
	}
	if n := objectCount(t, s); n != 1 {
		t.Errorf("object count = %d, want 1", n)
	}
	if left := tmpEntries(t, s); len(left) != 0 {
		t.Errorf("tmp not empty: %v", left)
	}
	if _, err := s.PutBytes(ctx, []byte("other")); err != nil {
		t.Fatal(err)
	}
	if n := objectCount(t, s); n != 2 {
		t.Errorf("object count = %d, want 2", n)
	}
}

func TestInvalidDigestRefused(t *testing.T) {
	s := newStore(t)
	// A file a traversing digest might reach.
	outside := filepath.Join(filepath.Dir(s.Dir()), "x")
	if err := os.WriteFile(outside, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := []Digest{"", "sha256:../../x", "sha256:../../../x", "../x", "sha256:" + Digest(bytes.Repeat([]byte("A"), 64))}
	for _, d := range bad {
		if s.Has(d) {
			t.Errorf("Has(%q) = true", d)
		}
		if p := s.Path(d); p != "" {
			t.Errorf("Path(%q) = %q, want empty", d, p)
		}
		if f, err := s.Open(d); !errors.Is(err, ErrInvalidDigest) {
			if f != nil {
				f.Close()
			}
			t.Errorf("Open(%q) error = %v, want ErrInvalidDigest", d, err)
		}
		if _, err := s.ReadAll(d); !errors.Is(err, ErrInvalidDigest) {
			t.Errorf("ReadAll(%q) error = %v, want ErrInvalidDigest", d, err)
		}
		if err := s.Verify(d); !errors.Is(err, ErrInvalidDigest) {
			t.Errorf("Verify(%q) error = %v, want ErrInvalidDigest", d, err)
		}
		if err := s.Remove(d); !errors.Is(err, ErrInvalidDigest) {
			t.Errorf("Remove(%q) error = %v, want ErrInvalidDigest", d, err)
		}
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("file outside the store was touched: %v", err)
	}
}

func TestMissingObject(t *testing.T) {
	s := newStore(t)
	d := Sum([]byte("never stored"))
	if s.Has(d) {
		t.Error("Has = true for a missing object")
	}
	if _, err := s.Open(d); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open error = %v, want fs.ErrNotExist", err)
	}
	if _, err := s.ReadAll(d); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadAll error = %v, want fs.ErrNotExist", err)
	}
	if err := s.Verify(d); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Verify error = %v, want fs.ErrNotExist", err)
	}
	if err := s.Remove(d); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Remove error = %v, want fs.ErrNotExist", err)
	}
}

// damage replaces the object d's content with data, bypassing the store.
func damage(t *testing.T, s *Store, d Digest, data []byte) {
	t.Helper()
	p := s.Path(d)
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o444); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyCatchesCorruption(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		damaged []byte
		// repaired says whether a later Put of the true content restores
		// the object: it always does, even when the size is right.
		repaired bool
	}{
		{"flipped byte", []byte("hellO, world"), true},
		{"truncated", []byte("hello"), true},
		{"emptied", []byte{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			content := []byte("hello, world")
			d, err := s.PutBytes(ctx, content)
			if err != nil {
				t.Fatal(err)
			}
			damage(t, s, d, tt.damaged)
			if err := s.Verify(d); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Verify error = %v, want ErrCorrupt", err)
			}
			if _, err := s.PutBytes(ctx, content); err != nil {
				t.Fatal(err)
			}
			err = s.Verify(d)
			if tt.repaired && err != nil {
				t.Errorf("after re-Put, Verify = %v, want repaired", err)
			}
			if !tt.repaired && !errors.Is(err, ErrCorrupt) {
				t.Errorf("after re-Put, Verify = %v, want ErrCorrupt still", err)
			}
		})
	}
}

func TestConcurrentPutsSameContent(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	data := bytes.Repeat([]byte("concurrent "), 50_000)
	want := Sum(data)
	const writers = 16
	var wg sync.WaitGroup
	errs := make([]error, writers)
	got := make([]Digest, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Separate Store values stand in for separate processes.
			s, err := Open(dir)
			if err != nil {
				errs[i] = err
				return
			}
			got[i], _, errs[i] = s.Put(ctx, bytes.NewReader(data))
		}()
	}
	wg.Wait()
	for i := range writers {
		if errs[i] != nil {
			t.Fatalf("writer %d: %v", i, errs[i])
		}
		if got[i] != want {
			t.Fatalf("writer %d: digest %s, want %s", i, got[i], want)
		}
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(want); err != nil {
		t.Fatal(err)
	}
	if n := objectCount(t, s); n != 1 {
		t.Errorf("object count = %d, want 1", n)
	}
	if left := tmpEntries(t, s); len(left) != 0 {
		t.Errorf("tmp not empty: %v", left)
	}
}

// cancelAfter is a reader that cancels a context after its first read.
type cancelAfter struct {
	r      io.Reader
	cancel context.CancelFunc
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p[:min(len(p), 10)])
	c.cancel()
	return n, err
}

type failingReader struct{ n int }

var errRead = errors.New("read failed")

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errRead
	}
	f.n--
	p[0] = 'x'
	return 1, nil
}

func TestPutFailureLeavesNothing(t *testing.T) {
	tests := []struct {
		name   string
		reader func(cancel context.CancelFunc) io.Reader
		want   error
	}{
		{"canceled before", func(cancel context.CancelFunc) io.Reader {
			cancel()
			return bytes.NewReader([]byte("data"))
		}, context.Canceled},
		{"canceled midway", func(cancel context.CancelFunc) io.Reader {
			return &cancelAfter{r: bytes.NewReader(bytes.Repeat([]byte("y"), 100)), cancel: cancel}
		}, context.Canceled},
		{"reader error", func(context.CancelFunc) io.Reader { return &failingReader{n: 3} }, errRead},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			_, _, err := s.Put(ctx, tt.reader(cancel))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Put error = %v, want %v", err, tt.want)
			}
			if n := objectCount(t, s); n != 0 {
				t.Errorf("object count = %d, want 0", n)
			}
			if left := tmpEntries(t, s); len(left) != 0 {
				t.Errorf("tmp not empty: %v", left)
			}
		})
	}
}

func TestPutRecreatesRemovedDirs(t *testing.T) {
	s := newStore(t)
	for _, sub := range []string{"tmp", "objects"} {
		if err := os.RemoveAll(filepath.Join(s.Dir(), sub)); err != nil {
			t.Fatal(err)
		}
	}
	d, err := s.PutBytes(context.Background(), []byte("back"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(d); err != nil {
		t.Fatal(err)
	}
}

func TestRemove(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	d, err := s.PutBytes(ctx, []byte("to go"))
	if err != nil {
		t.Fatal(err)
	}
	keep, err := s.PutBytes(ctx, []byte("to keep"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(d); err != nil {
		t.Fatal(err)
	}
	if s.Has(d) {
		t.Error("Has = true after Remove")
	}
	if !s.Has(keep) {
		t.Error("Remove took another object")
	}
	if err := s.Remove(d); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("second Remove error = %v, want fs.ErrNotExist", err)
	}
}

func TestWalk(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	want := map[Digest]int64{}
	for _, c := range []string{"a", "bb", "ccc", "dddd", ""} {
		d, err := s.PutBytes(ctx, []byte(c))
		if err != nil {
			t.Fatal(err)
		}
		want[d] = int64(len(c))
	}
	// Junk that is not an object must be skipped.
	junkDir := filepath.Join(s.Dir(), "objects", "zz")
	if err := os.MkdirAll(junkDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(junkDir, "notanobject"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var order []Digest
	got := map[Digest]int64{}
	err := s.Walk(ctx, func(d Digest, size int64) error {
		order = append(order, d)
		got[d] = size
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("Walk saw %d objects, want %d", len(got), len(want))
	}
	for d, size := range want {
		if got[d] != size {
			t.Errorf("Walk size of %s = %d, want %d", d, got[d], size)
		}
	}
	if !slices.IsSorted(order) {
		t.Errorf("Walk order not sorted: %v", order)
	}

	stop := errors.New("stop")
	calls := 0
	err = s.Walk(ctx, func(Digest, int64) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("Walk with failing fn: err %v after %d calls, want stop after 1", err, calls)
	}
}

func TestCleanTemp(t *testing.T) {
	s := newStore(t)
	tmp := filepath.Join(s.Dir(), "tmp")
	old := filepath.Join(tmp, tmpPrefix+"old")
	fresh := filepath.Join(tmp, tmpPrefix+"fresh")
	foreign := filepath.Join(tmp, "other-old")
	for _, p := range []string{old, fresh, foreign} {
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * time.Hour)
	for _, p := range []string{old, foreign} {
		if err := os.Chtimes(p, past, past); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.CleanTemp(time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("CleanTemp removed %d, want 1", n)
	}
	if _, err := os.Stat(old); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("old temp still there: %v", err)
	}
	for _, p := range []string{fresh, foreign} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed: %v", filepath.Base(p), err)
		}
	}
}

// TestReadsCheckContent: every way of reading an object out of the store
// checks it against its digest; a same-size damage is ErrCorrupt.
func TestReadsCheckContent(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	content := []byte("hello, world")
	d, err := s.PutBytes(ctx, content)
	if err != nil {
		t.Fatal(err)
	}
	check := func(want error) {
		t.Helper()
		if _, err := s.ReadAll(d); !errors.Is(err, want) && (want != nil || err != nil) {
			t.Errorf("ReadAll: %v, want %v", err, want)
		}
		out, err := os.Create(filepath.Join(t.TempDir(), "out"))
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		if _, err := s.CopyTo(ctx, out, d); !errors.Is(err, want) && (want != nil || err != nil) {
			t.Errorf("CopyTo: %v, want %v", err, want)
		}
		r, err := s.NewReader(d)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if _, err := io.ReadAll(r); !errors.Is(err, want) && (want != nil || err != nil) {
			t.Errorf("NewReader: %v, want %v", err, want)
		}
	}
	check(nil)
	damage(t, s, d, []byte("hellO, world"))
	check(ErrCorrupt)
	// A batch heals it as Put does.
	b := s.NewBatch()
	if _, _, err := b.Put(ctx, bytes.NewReader(content)); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	check(nil)
}

// TestPutKeepsHoles: a sparse file stored from its start keeps its holes in
// the store, and CopyTo writes them back as holes; the digest is over the
// logical content.
func TestPutKeepsHoles(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	dir := t.TempDir()
	const size = 64 << 20
	src := filepath.Join(dir, "sparse")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("head"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("tail"), size-4); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if blocks(t, src) > 1<<20 {
		t.Skipf("this file system does not make holes (%d bytes allocated)", blocks(t, src))
	}
	want := make([]byte, size)
	copy(want, "head")
	copy(want[size-4:], "tail")
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	d, n, err := s.Put(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if d != Sum(want) || n != size {
		t.Fatalf("Put of a sparse file: %s, %d; want %s, %d", d, n, Sum(want), size)
	}
	if got := blocks(t, s.Path(d)); got > 1<<20 {
		t.Errorf("the object of a sparse file takes %d bytes", got)
	}
	out, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := s.CopyTo(ctx, out, d); err != nil {
		t.Fatal(err)
	}
	if got := blocks(t, out.Name()); got > 1<<20 {
		t.Errorf("the copy out of a sparse object takes %d bytes", got)
	}
	if got, err := os.ReadFile(out.Name()); err != nil || !bytes.Equal(got, want) {
		t.Errorf("the copy out differs from the content (%v)", err)
	}
}

// blocks is the disk space p takes, in bytes.
func blocks(t *testing.T, p string) int64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		t.Skip("no block counts on this system")
	}
	return st.Blocks * 512
}
