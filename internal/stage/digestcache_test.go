package stage

import (
	"bytes"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wtx-dev/wtx/internal/tree"
	"github.com/wtx-dev/wtx/internal/wtxtest"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files")

func goldenCache() map[cacheKey]cacheVal {
	var d1, d2 [32]byte
	for i := range d1 {
		d1[i], d2[i] = 0xab, byte(i)
	}
	return map[cacheKey]cacheVal{
		{sideView, "a/f"}:        {st: tree.Stat{Ino: 9, Size: 5, Mtime: 1700000000123456789, Ctime: 1700000000987654321}, digest: d1},
		{sideView, "name\xff\n"}: {st: tree.Stat{Ino: 10, Size: 0, Mtime: 1, Ctime: 2}, digest: d2},
		{sideBase, "a/f"}:        {st: tree.Stat{Ino: 42, Dev: 2049, Size: 5, Mtime: 3, Ctime: 4}, digest: d2},
	}
}

// TestDigestCacheGoldenBytes pins the cache format (version 1) byte for
// byte, with the persisted numbers of its sides.
func TestDigestCacheGoldenBytes(t *testing.T) {
	path := filepath.Join("testdata", "digests-v1.hex")
	got := encodeDigestCache(goldenCache())
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for h := hex.EncodeToString(got); len(h) > 0; {
			n := min(64, len(h))
			b.WriteString(h[:n] + "\n")
			h = h[n:]
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := hex.DecodeString(strings.Join(strings.Fields(string(data)), ""))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("digest cache encoding changed (a format change needs a new version):\ngot  %x\nwant %x", got, want)
	}
	m, err := decodeDigestCache(want)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m, goldenCache()) {
		t.Fatalf("golden cache decodes to %+v", m)
	}
}

// TestDigestCacheEveryByteIsChecked: changing any one byte, cutting the
// file short or adding a byte makes it unreadable; it is never read as
// other digests.
func TestDigestCacheEveryByteIsChecked(t *testing.T) {
	good := encodeDigestCache(goldenCache())
	for i := range good {
		bad := bytes.Clone(good)
		bad[i] ^= 0x01
		if _, err := decodeDigestCache(bad); err == nil {
			t.Errorf("byte %d flipped: decoded", i)
		}
	}
	for n := range len(good) {
		if _, err := decodeDigestCache(good[:n]); err == nil {
			t.Errorf("cut to %d bytes: decoded", n)
		}
	}
	if _, err := decodeDigestCache(append(bytes.Clone(good), 0)); err == nil {
		t.Error("a trailing byte: decoded")
	}
}

// TestDigestCacheKeepsOnlyWhatTheFenceProves: a view file changed in the
// fence's clock tick or later is not kept (a write after the read could
// leave its tuple as it was); base digests need no fence; a tuple that
// moved misses.
func TestDigestCacheKeepsOnlyWhatTheFenceProves(t *testing.T) {
	dir := t.TempDir()
	c := openDigestCache(dir, "")
	d := sha256Hex("x")
	st := tree.Stat{Ino: 1, Size: 1, Mtime: 100, Ctime: 100}
	c.learn(sideView, "nofence", st, d) // no fence taken: never kept
	c.fence, c.fenceOK = 200, true
	c.learn(sideView, "old", st, d)
	c.learn(sideView, "racy-ctime", tree.Stat{Ino: 2, Size: 1, Mtime: 100, Ctime: 200}, d)
	c.learn(sideView, "racy-mtime", tree.Stat{Ino: 3, Size: 1, Mtime: 250, Ctime: 100}, d)
	c.learn(sideBase, "base", tree.Stat{Ino: 4, Size: 1, Mtime: 900, Ctime: 900}, d)
	c.save()

	c = openDigestCache(dir, "")
	for _, p := range []string{"nofence", "racy-ctime", "racy-mtime"} {
		if _, ok := c.old[cacheKey{sideView, p}]; ok {
			t.Errorf("%s was kept", p)
		}
	}
	if got, ok := c.lookup(sideView, "old", st); !ok || got != d {
		t.Errorf("old: %q %v", got, ok)
	}
	moved := st
	moved.Ctime++
	if _, ok := c.lookup(sideView, "old", moved); ok {
		t.Error("a moved ctime still found the digest")
	}
	if _, ok := c.lookup(sideBase, "old", st); ok {
		t.Error("a view digest was found as a base digest")
	}
	if got, ok := c.lookup(sideBase, "base", tree.Stat{Ino: 4, Size: 1, Mtime: 900, Ctime: 900}); !ok || got != d {
		t.Errorf("base: %q %v", got, ok)
	}
}

// TestDigestCacheDamagedReadsEmpty: a damaged cache file is read as empty
// and replaced by the next save.
func TestDigestCacheDamagedReadsEmpty(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, digestCacheName)
	raw := encodeDigestCache(goldenCache())
	raw[len(raw)/2] ^= 0xff
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	c := openDigestCache(dir, "")
	if len(c.old) != 0 {
		t.Fatalf("a damaged cache read as %d entries", len(c.old))
	}
	c.save()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := decodeDigestCache(data); err != nil || len(m) != 0 {
		t.Fatalf("after save: %v, %d entries", err, len(m))
	}
}

// TestDigestCacheNotAFile: a FIFO, a directory or a symlink where the cache
// file belongs reads as an empty cache at once (the reader never blocks on
// a FIFO, never follows a link).
func TestDigestCacheNotAFile(t *testing.T) {
	for name, mk := range map[string]func(p string) error{
		"fifo":    func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"dir":     func(p string) error { return os.Mkdir(p, 0o700) },
		"symlink": func(p string) error { return os.Symlink("elsewhere", p) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := mk(filepath.Join(dir, digestCacheName)); err != nil {
				t.Fatal(err)
			}
			done := make(chan *digestCache, 1)
			go func() { done <- openDigestCache(dir, "") }()
			select {
			case c := <-done:
				if len(c.old) != 0 {
					t.Errorf("read %d entries", len(c.old))
				}
			case <-time.After(wtxtest.Patience(t)):
				t.Fatal("reading the cache blocked")
			}
		})
	}
}

func sha256Hex(s string) string {
	var b [32]byte
	copy(b[:], s)
	return digestString(b)
}

func FuzzDecodeDigestCache(f *testing.F) {
	f.Add(encodeDigestCache(goldenCache()))
	f.Add(encodeDigestCache(nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeDigestCache(data)
		if err != nil {
			return
		}
		if again := encodeDigestCache(m); !bytes.Equal(again, data) {
			t.Fatalf("decoded cache encodes to other bytes")
		}
	})
}
