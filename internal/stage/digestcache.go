package stage

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/binenc"
	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/tree"
)

// A digestCache remembers the digests a stage's scans computed, keyed by
// path and stat tuple, so that the next scan hashes only what moved since:
// the role git's index plays for `git status`. Without it every status,
// diff and apply hashes every staged file the command wrote and the base
// side of each of them again.
//
// No view digest is kept while a command may be writing in the view (its
// root or upper directory is locked, see lockView): a write through a
// shared memory mapping to a page that is already dirty moves neither mtime
// nor ctime, so a digest taken then could outlive the content it names.
//
// It holds two sides:
//
//   - sideView: a file of the view (a staged file the command wrote). A
//     digest is kept only when the file's ctime and mtime are strictly
//     below a fence: a time of the view's own filesystem, read from a fresh
//     file made before the file was opened. A write after the read gives
//     the file a ctime at or past the fence, so its tuple no longer matches
//     and it is hashed again. A file written in the fence's own clock tick
//     is not kept (it is "racy", as in git).
//   - sideBase: a base file of the workspace at its base tuple from the
//     manifest. fillBaseDigests accepts a digest only when the file held
//     that tuple, which is not racy, before and after it was read, so the
//     digest is the base content's; the key is that tuple.
//
// The cache is derived data, never state: a missing, unreadable or damaged
// file (length, magic, version, checksum or trailing bytes) reads as empty,
// and the scan hashes as if it were new. It is written by rename, without a
// sync: a torn write after a power cut fails its checksum. Two processes
// scanning the same stage may both write it; either file is correct.
// WTX_DISABLE=digest-cache (failpoint build) trusts a kept digest whatever
// the file's tuple now: the negative control of the cache's tests.
type digestCache struct {
	file string // the cache file; "" when there is none (no stage directory)

	mu      sync.Mutex
	old     map[cacheKey]cacheVal // as loaded
	next    map[cacheKey]cacheVal // what this scan saw and learned: the next file
	changed bool                  // next differs from old
	fence   int64                 // 0 until taken
	fenceOK bool
	// busy: a command may be writing in the view now (viewBusy), so no
	// view digest is kept.
	busy bool
}

type cacheSide byte

// The sides are persisted in the cache file.
const (
	sideView cacheSide = 1 // persisted
	sideBase cacheSide = 2 // persisted
)

type cacheKey struct {
	side cacheSide
	path string
}

type cacheVal struct {
	st     tree.Stat
	digest [sha256.Size]byte
}

const (
	digestCacheName    = "digests"
	digestCacheMagic   = "WTXD"
	digestCacheVersion = 1
	// maxCacheEntries bounds what a cache file may claim, so that a
	// damaged count cannot make the reader allocate without limit.
	maxCacheEntries = 1 << 26
)

// openDigestCache reads the cache of the stage directory dir (on the
// view's file system: the fence file is made there); lockDir is the
// directory a command running in the view holds locked.
func openDigestCache(dir, lockDir string) *digestCache {
	c := &digestCache{next: map[cacheKey]cacheVal{}}
	if lockDir != "" && !failpoint.Disabled("digest-cache-busy") {
		c.busy = viewBusy(lockDir)
	}
	if dir == "" {
		return c
	}
	c.file = filepath.Join(dir, digestCacheName)
	raw, err := readRegular(c.file)
	if err != nil {
		// Absent, unreadable or not a file: a cache starts empty, and
		// anything but an absent one is replaced by the next save.
		c.changed = !errors.Is(err, fs.ErrNotExist)
		return c
	}
	old, err := decodeDigestCache(raw)
	if err != nil {
		c.changed = true // damaged: the next save replaces it
		return c
	}
	c.old = old
	c.next = make(map[cacheKey]cacheVal, len(old))
	return c
}

// lookup returns the digest kept for path at tuple st, and records it for
// the next file.
func (c *digestCache) lookup(side cacheSide, path string, st tree.Stat) (string, bool) {
	if c == nil {
		return "", false
	}
	k := cacheKey{side, path}
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.old[k]
	// The negative control trusts a kept digest whatever the file's tuple.
	if !ok || v.st != st && !failpoint.Disabled("digest-cache") {
		return "", false
	}
	c.next[k] = v
	return digestString(v.digest), true
}

// takeFence reads the fence time once per scan, before the first file the
// scan hashes is opened. It reports whether view digests may be kept.
func (c *digestCache) takeFence() {
	if c == nil || c.file == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fence != 0 {
		return
	}
	t, err := fsTime(filepath.Dir(c.file))
	if err != nil {
		c.fence = -1 // no fence: no view digest is kept
		return
	}
	c.fence, c.fenceOK = t, true
}

// learn keeps the digest a scan computed for path at tuple st. A view
// tuple at or past the fence is racy and is not kept.
func (c *digestCache) learn(side cacheSide, path string, st tree.Stat, digest string) {
	if c == nil || c.file == "" {
		return
	}
	raw, ok := digestBytes(digest)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if side == sideView && (c.busy || !c.fenceOK || st.Ctime >= c.fence || st.Mtime >= c.fence) {
		return
	}
	k := cacheKey{side, path}
	v := cacheVal{st: st, digest: raw}
	c.next[k] = v
	if o, ok := c.old[k]; !ok || o != v {
		c.changed = true
	}
}

// save writes the cache for the next scan when it changed: what this scan
// looked up or learned. Paths it did not meet are dropped, so the file
// follows the change set instead of growing with it. A failed write only
// costs the next scan its hashing, and is not reported.
func (c *digestCache) save() {
	if c == nil || c.file == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.changed && len(c.next) == len(c.old) {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.file), "."+digestCacheName+"-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(encodeDigestCache(c.next))
	cerr := tmp.Close()
	if werr != nil || cerr != nil {
		_ = os.Remove(tmp.Name()) // the cache is only an aid; a leftover temp is harmless too
		return
	}
	if err := os.Rename(tmp.Name(), c.file); err != nil {
		_ = os.Remove(tmp.Name()) // as above
	}
}

// encodeDigestCache lays out the cache file: magic, version, entry count,
// then entries sorted by side and path (side byte, path, inode, device,
// size, mtime, ctime, 32 digest bytes), then a SHA-256 of everything
// before it.
func encodeDigestCache(m map[cacheKey]cacheVal) []byte {
	keys := make([]cacheKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].side != keys[j].side {
			return keys[i].side < keys[j].side
		}
		return keys[i].path < keys[j].path
	})
	buf := make([]byte, 0, 64+len(keys)*96)
	buf = append(buf, digestCacheMagic...)
	buf = append(buf, digestCacheVersion)
	buf = binary.AppendUvarint(buf, uint64(len(keys)))
	for _, k := range keys {
		v := m[k]
		buf = append(buf, byte(k.side))
		buf = binenc.AppendString(buf, k.path)
		buf = tree.AppendStat(buf, v.st)
		buf = append(buf, v.digest[:]...)
	}
	sum := sha256.Sum256(buf)
	return append(buf, sum[:]...)
}

var errCacheCorrupt = errors.New("digest cache damaged")

// decodeDigestCache reads what encodeDigestCache wrote. It checks the
// length and checksum first, then the magic and version, then every entry
// (a known side, a path, sorted and unique), and rejects trailing
// bytes; the first error is kept.
func decodeDigestCache(raw []byte) (map[cacheKey]cacheVal, error) {
	if len(raw) < len(digestCacheMagic)+1+1+sha256.Size {
		return nil, fmt.Errorf("%w: %d bytes", errCacheCorrupt, len(raw))
	}
	body, sum := raw[:len(raw)-sha256.Size], raw[len(raw)-sha256.Size:]
	if want := sha256.Sum256(body); !bytes.Equal(want[:], sum) {
		return nil, fmt.Errorf("%w: checksum", errCacheCorrupt)
	}
	if string(body[:len(digestCacheMagic)]) != digestCacheMagic {
		return nil, fmt.Errorf("%w: magic", errCacheCorrupt)
	}
	if body[len(digestCacheMagic)] != digestCacheVersion {
		return nil, fmt.Errorf("%w: version %d", errCacheCorrupt, body[len(digestCacheMagic)])
	}
	d := binenc.NewDecoder(body[len(digestCacheMagic)+1:])
	n := d.Uvarint()
	if d.Err() == nil && (n > maxCacheEntries || n > uint64(d.Len())) {
		d.Fail(fmt.Errorf("%w: %d entries", errCacheCorrupt, n))
	}
	var m map[cacheKey]cacheVal
	if d.Err() == nil {
		m = make(map[cacheKey]cacheVal, n)
	}
	var prev cacheKey
	for i := uint64(0); i < n && d.Err() == nil; i++ {
		k := cacheKey{side: cacheSide(d.Byte()), path: d.String()}
		v := cacheVal{st: tree.ReadStat(d)}
		for j := range v.digest {
			v.digest[j] = d.Byte()
		}
		if d.Err() != nil {
			break
		}
		switch {
		case k.side != sideView && k.side != sideBase:
			d.Fail(fmt.Errorf("%w: side %d", errCacheCorrupt, k.side))
		case k.path == "":
			d.Fail(fmt.Errorf("%w: path %q", errCacheCorrupt, k.path))
		case i > 0 && (k.side < prev.side || k.side == prev.side && k.path <= prev.path):
			d.Fail(fmt.Errorf("%w: order", errCacheCorrupt))
		}
		m[k], prev = v, k
	}
	if d.Err() == nil && d.Len() != 0 {
		d.Fail(fmt.Errorf("%w: %d trailing bytes", errCacheCorrupt, d.Len()))
	}
	if err := d.Err(); err != nil {
		if !errors.Is(err, errCacheCorrupt) {
			err = fmt.Errorf("%w: %w", errCacheCorrupt, err)
		}
		return nil, err
	}
	return m, nil
}

// readRegular reads the regular file at path, never following a symlink
// and never blocking on a FIFO put in its place.
func readRegular(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w", path, errCacheCorrupt)
	}
	return io.ReadAll(f)
}

func digestBytes(d string) ([sha256.Size]byte, bool) {
	var out [sha256.Size]byte
	h := blob.Digest(d).Hex()
	if h == "" {
		return out, false
	}
	if _, err := hex.Decode(out[:], []byte(h)); err != nil {
		return out, false
	}
	return out, true
}

func digestString(b [sha256.Size]byte) string {
	return "sha256:" + hex.EncodeToString(b[:])
}

// fsTime returns a time of dir's filesystem: the change time of a file
// made there now. Files changed before it have earlier times; a file
// changed after it has this time or a later one.
func fsTime(dir string) (int64, error) {
	f, err := os.CreateTemp(dir, ".fence-*")
	if err != nil {
		return 0, err
	}
	name := f.Name()
	_, werr := f.Write([]byte{1})
	fi, serr := f.Stat()
	cerr := f.Close()
	rerr := os.Remove(name)
	if err := errors.Join(werr, serr, cerr, rerr); err != nil {
		return 0, err
	}
	t := fi.ModTime().UnixNano()
	if ct := ctimeOf(fi); ct > t {
		t = ct
	}
	return t, nil
}
