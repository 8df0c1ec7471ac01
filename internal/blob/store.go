package blob

import (
	"github.com/wtx-dev/wtx/internal/fsx"

	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrCorrupt is wrapped by errors from [Store.Verify] when an object's
// content no longer hashes to its name.
var ErrCorrupt = errors.New("corrupt object")

// ErrMissing is wrapped, with [fs.ErrNotExist], by errors about an object
// that is not stored.
var ErrMissing = errors.New("object not in the blob store")

const (
	objectsDir = "objects"
	tmpDir     = "tmp"
	tmpPrefix  = "put-"

	// dirPerm keeps stored contents private to the owner: objects are
	// copies of workspace files, which may hold secrets.
	dirPerm    = 0o700
	objectPerm = 0o400
)

// A Store is a content-addressed, write-once object store in one directory.
// See the package documentation for its layout and guarantees.
type Store struct {
	dir string
}

// Open returns the store in dir, creating dir and its objects and tmp
// directories if they are missing.
func Open(dir string) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open blob store %s: %w", dir, err)
	}
	for _, sub := range []string{objectsDir, tmpDir} {
		if err := os.MkdirAll(filepath.Join(abs, sub), dirPerm); err != nil {
			return nil, fmt.Errorf("open blob store %s: %w", abs, err)
		}
	}
	return &Store{dir: abs}, nil
}

// Dir returns the store's directory as an absolute path.
func (s *Store) Dir() string { return s.dir }

// Path returns the file name of the object d, whether or not it is stored,
// or "" if d is not valid.
func (s *Store) Path(d Digest) string {
	h := d.Hex()
	if h == "" {
		return ""
	}
	return filepath.Join(s.dir, objectsDir, h[:2], h[2:])
}

// path is Path for a digest that must be valid; op names the caller in the
// error.
func (s *Store) path(op string, d Digest) (string, error) {
	p := s.Path(d)
	if p == "" {
		return "", fmt.Errorf("%s blob %q: %w", op, string(d), ErrInvalidDigest)
	}
	return p, nil
}

// Put reads r to its end and stores its bytes, returning their digest and
// length. Once Put returns without error the object survives power loss.
// The new copy always replaces the object's file, atomically, even when it
// exists: an object damaged on disk is healed by storing its content again,
// and an object reused by a new write is as young as the write (see
// [Store.Walk] and the grace period of a collector). When r is a regular
// file read from its start, its holes stay holes in the object.
//
// Put stops with ctx's error if ctx is done before r is exhausted; nothing
// is stored then.
func (s *Store) Put(ctx context.Context, r io.Reader) (d Digest, n int64, err error) {
	if err := ctx.Err(); err != nil {
		return "", 0, fmt.Errorf("put blob: %w", err)
	}
	f, err := s.createTemp()
	if err != nil {
		return "", 0, fmt.Errorf("put blob: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close() // a second Close after a successful one is harmless
			os.Remove(tmp)
			err = fmt.Errorf("put blob %s: %w", tmp, err)
		}
	}()

	h := NewHasher()
	if n, err = copyIn(ctx, f, r, h); err != nil {
		return "", 0, err
	}
	if err = f.Chmod(objectPerm); err != nil {
		return "", 0, err
	}
	// fsync, not fdatasync: the mode change must be durable too.
	if err = fsx.SyncFile(f); err != nil {
		return "", 0, err
	}
	if err = f.Close(); err != nil {
		return "", 0, err
	}

	d = h.Digest()
	dst := s.Path(d)
	prefixDir := filepath.Dir(dst)
	if err = s.ensurePrefixDir(prefixDir); err != nil {
		return "", 0, err
	}
	// An object already there is replaced: the fresh copy is known good
	// (damage heals) and young (a collector's grace protects it).
	if err = os.Rename(tmp, dst); err != nil {
		return "", 0, err
	}
	if err = syncDir(prefixDir); err != nil {
		return "", 0, err
	}
	return d, n, nil
}

// PutBytes stores b and returns its digest, like [Store.Put].
func (s *Store) PutBytes(ctx context.Context, b []byte) (Digest, error) {
	d, _, err := s.Put(ctx, bytes.NewReader(b))
	return d, err
}

// createTemp creates a new temporary file in the tmp directory, re-creating
// the directory if something removed it.
func (s *Store) createTemp() (*os.File, error) {
	dir := filepath.Join(s.dir, tmpDir)
	f, err := fsx.CreateTemp(dir, tmpPrefix)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, dirPerm); err != nil {
			return nil, err
		}
		f, err = fsx.CreateTemp(dir, tmpPrefix)
	}
	return f, err
}

// smallBufs holds the buffers small objects are read into: one byte more
// than the largest small file (see fsx.File.ReadSmall).
var smallBufs = sync.Pool{New: func() any { b := make([]byte, smallObject+1); return &b }}

// smallObject is the size under which an object is read and written whole.
const smallObject = 64 << 10

// writeTemp writes data into a new temporary file with the object's mode
// and returns its name; the file is not synced.
func (s *Store) writeTemp(data []byte) (string, error) {
	dir := filepath.Join(s.dir, tmpDir)
	f, err := fsx.CreateAt(dir, tmpPrefix, objectPerm)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, dirPerm); err != nil {
			return "", err
		}
		f, err = fsx.CreateAt(dir, tmpPrefix, objectPerm)
	}
	if err != nil {
		return "", err
	}
	err = f.WriteAt(data, 0)
	if err == nil && !fsx.ExactPerm(objectPerm) {
		err = f.Chmod(objectPerm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name()) // best effort: CleanTemp removes leftovers
		return "", err
	}
	return f.Name(), nil
}

// openSmall reads the object d whole into buf when it is shorter than buf
// (smallObject+1 bytes: under 64 KiB); a larger object is returned open
// instead, for the caller to read as a stream and close. Errors are as for
// [Store.Open].
func (s *Store) openSmall(op string, d Digest, buf []byte) (f *fsx.File, data []byte, err error) {
	p, err := s.path(op, d)
	if err != nil {
		return nil, nil, err
	}
	data, f, err = fsx.ReadSmallFile(p, buf)
	if err != nil {
		return nil, nil, missing(op, d, err)
	}
	return f, data, nil
}

// CopyToFile is CopyTo into a new empty fsx.File: an object under 64 KiB
// is read with one call, checked, and written with one.
func (s *Store) CopyToFile(ctx context.Context, dst *fsx.File, d Digest) (int64, error) {
	buf := smallBufs.Get().(*[]byte)
	defer smallBufs.Put(buf)
	src, data, err := s.openSmall("copy", d, *buf)
	if err != nil {
		return 0, err
	}
	if src == nil {
		if got := Sum(data); got != d {
			return 0, corrupt("copy", d, got)
		}
		if err := dst.WriteAt(data, 0); err != nil {
			return 0, fmt.Errorf("copy blob %s: %w", d, err)
		}
		return int64(len(data)), nil
	}
	defer src.Close()
	from, err := src.Dup()
	if err != nil {
		return 0, err
	}
	defer from.Close()
	to, err := dst.Dup()
	if err != nil {
		return 0, err
	}
	defer to.Close()
	return copyChecked(ctx, to, from, d)
}

// copyChecked copies src, the object d, into dst with its holes, hashing it
// on the way: content that does not hash to d is an error wrapping
// ErrCorrupt.
func copyChecked(ctx context.Context, dst, src *os.File, d Digest) (int64, error) {
	h := NewHasher()
	n, err := fsx.CopySparse(ctx, dst, src, h)
	if err != nil {
		return n, fmt.Errorf("copy blob %s: %w", d, err)
	}
	if got := h.Digest(); got != d {
		return n, corrupt("copy", d, got)
	}
	return n, nil
}

// ensurePrefixDir creates the two-hex-digit directory dir if it is missing
// and makes its entry in the objects directory durable.
func (s *Store) ensurePrefixDir(dir string) error {
	err := os.Mkdir(dir, dirPerm)
	switch {
	case errors.Is(err, fs.ErrExist):
		return nil
	case errors.Is(err, fs.ErrNotExist):
		// The objects directory itself is gone; bring it back.
		if err := os.MkdirAll(dir, dirPerm); err != nil {
			return err
		}
		return syncDir(filepath.Dir(filepath.Dir(dir)))
	case err != nil:
		return err
	}
	return syncDir(filepath.Dir(dir))
}

// Has reports whether the object d is stored. It is false for an invalid d.
func (s *Store) Has(d Digest) bool {
	p := s.Path(d)
	if p == "" {
		return false
	}
	fi, err := os.Lstat(p)
	return err == nil && fi.Mode().IsRegular()
}

// Open opens the object d for reading. If d is not stored, the error wraps
// [fs.ErrNotExist]; if d is not valid, it wraps [ErrInvalidDigest].
func (s *Store) Open(d Digest) (*os.File, error) {
	p, err := s.path("open", d)
	if err != nil {
		return nil, err
	}
	f, err := fsx.OpenRead(p)
	if err != nil {
		return nil, missing("open", d, err)
	}
	return f, nil
}

// missing wraps err, and ErrMissing when err says the object is not there.
func missing(op string, d Digest, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s blob %s: %w: %w", op, d, ErrMissing, err)
	}
	return fmt.Errorf("%s blob %s: %w", op, d, err)
}

// ReadAll returns the content of the object d, checked against d: content
// that no longer hashes to d is an error wrapping [ErrCorrupt]. Other errors
// are as for [Store.Open].
func (s *Store) ReadAll(d Digest) ([]byte, error) {
	p, err := s.path("read", d)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, missing("read", d, err)
	}
	if got := Sum(b); got != d {
		return nil, corrupt("read", d, got)
	}
	return b, nil
}

// CopyTo copies the content of the object d into dst, a new empty file,
// hashing it on the way, and returns its length. Holes of the object stay
// holes in dst. Content that does not hash to d is an error wrapping
// [ErrCorrupt]; dst then holds bytes that must not be used, and the caller
// removes it. Other errors are as for [Store.Open].
func (s *Store) CopyTo(ctx context.Context, dst *os.File, d Digest) (int64, error) {
	src, err := s.Open(d)
	if err != nil {
		return 0, err
	}
	defer src.Close()
	return copyChecked(ctx, dst, src, d)
}

// NewReader returns a reader of the object d that checks the content against
// d: at the end, content that no longer hashes to d gives an error wrapping
// [ErrCorrupt] instead of io.EOF. Errors opening it are as for [Store.Open].
func (s *Store) NewReader(d Digest) (io.ReadCloser, error) {
	f, err := s.Open(d)
	if err != nil {
		return nil, err
	}
	return &verifier{f: f, d: d, h: NewHasher()}, nil
}

type verifier struct {
	f *os.File
	d Digest
	h *Hasher
}

func (v *verifier) Read(p []byte) (int, error) {
	n, err := v.f.Read(p)
	v.h.Write(p[:n])
	if err == io.EOF {
		if got := v.h.Digest(); got != v.d {
			return n, corrupt("read", v.d, got)
		}
	}
	return n, err
}

func (v *verifier) Close() error { return v.f.Close() }

func corrupt(op string, d, got Digest) error {
	return fmt.Errorf("%s blob %s: its content hashes to %s: %w", op, d, got, ErrCorrupt)
}

// Verify re-reads the object d and returns an error wrapping [ErrCorrupt] if
// its content no longer hashes to d. Other errors are as for [Store.Open].
func (s *Store) Verify(d Digest) error {
	buf := smallBufs.Get().(*[]byte)
	defer smallBufs.Put(buf)
	small, data, err := s.openSmall("verify", d, *buf)
	if err != nil {
		return err
	}
	if small == nil {
		if got := Sum(data); got != d {
			return corrupt("verify", d, got)
		}
		return nil
	}
	defer small.Close()
	h := NewHasher()
	if _, err := small.ReadTo(h, nil); err != nil {
		return fmt.Errorf("verify blob %s: %w", d, err)
	}
	if got := h.Digest(); got != d {
		return corrupt("verify", d, got)
	}
	return nil
}

// Remove deletes the object d. If d is not stored, the error wraps
// [fs.ErrNotExist]. The removal is not synced: after a crash the object may
// be back, which is harmless for a content-addressed store.
func (s *Store) Remove(d Digest) error {
	p, err := s.path("remove", d)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil {
		return fmt.Errorf("remove blob %s: %w", d, err)
	}
	return nil
}

// Walk calls fn for every stored object with its digest and size, in
// lexical order of digest. Files in the objects directory that do not name a
// valid object are skipped. Walk stops at the first error from fn, or when
// ctx is done, and returns that error.
func (s *Store) Walk(ctx context.Context, fn func(d Digest, size int64) error) error {
	root := filepath.Join(s.dir, objectsDir)
	prefixes, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("walk blobs %s: %w", root, err)
	}
	for _, p := range prefixes {
		if !p.IsDir() || len(p.Name()) != 2 {
			continue
		}
		dir := filepath.Join(root, p.Name())
		entries, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("walk blobs %s: %w", dir, err)
		}
		for _, e := range entries {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("walk blobs %s: %w", dir, err)
			}
			d := Digest(prefix + p.Name() + e.Name())
			if !e.Type().IsRegular() || !d.Valid() {
				continue
			}
			fi, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since the listing
			}
			if err != nil {
				return fmt.Errorf("walk blobs %s: %w", dir, err)
			}
			if err := fn(d, fi.Size()); err != nil {
				return err
			}
		}
	}
	return nil
}

// CleanTemp removes temporary files last modified before cutoff, left behind
// by writers that crashed, and returns how many it removed. Pass a cutoff
// well in the past so that writes still in progress are not disturbed.
func (s *Store) CleanTemp(cutoff time.Time) (int, error) {
	dir := filepath.Join(s.dir, tmpDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("clean blob temp %s: %w", dir, err)
	}
	removed := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), tmpPrefix) {
			continue
		}
		fi, err := e.Info()
		if err != nil || !fi.ModTime().Before(cutoff) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, fmt.Errorf("clean blob temp %s: %w", dir, err)
		}
		removed++
	}
	return removed, nil
}

// copyIn copies r to its end into tmp, a new file, and into h. A regular
// file read from its start is copied with its holes.
func copyIn(ctx context.Context, tmp *os.File, r io.Reader, h io.Writer) (int64, error) {
	if f, ok := r.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			if pos, err := f.Seek(0, io.SeekCurrent); err == nil && pos == 0 {
				n, err := fsx.CopySparse(ctx, tmp, f, h)
				if err == nil {
					_, err = f.Seek(n, io.SeekStart) // read to its end, as if by Read
				}
				return n, err
			}
		}
	}
	return io.Copy(io.MultiWriter(tmp, h), ctxReader{ctx: ctx, r: r})
}

// ctxReader stops reading once its context is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// syncDir makes the entries of the directory dir durable. File systems that
// cannot sync a directory are tolerated.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = fsx.SyncFile(f)
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) || errors.Is(err, errors.ErrUnsupported) {
		err = nil
	}
	return errors.Join(err, f.Close())
}
