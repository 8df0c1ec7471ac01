package blob

import (
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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wtx-dev/wtx/internal/fsx"
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
// See the package documentation for its layout and guarantees. Every
// directory of the store is reached through a handle opened once beneath
// the store's directory, never through a symlink or a mount point.
type Store struct {
	// path is the store's directory, for messages only.
	path string
	// root is the store's directory, open.
	root *fsx.Dir
	// objects and tmp are its objects and tmp directories; prefixes holds
	// the two-hex-digit directories under objects as they are first used.
	objects, tmp atomic.Pointer[fsx.Dir]
	prefixes     [256]atomic.Pointer[fsx.Dir]
	// mu serialises the opening of directories; stale keeps the handles
	// of directories found removed, for Close.
	mu    sync.Mutex
	stale []*fsx.Dir
}

// ErrDamaged is wrapped by errors about an entry of the store that is not
// what the store keeps there: a symlink, a mount point or a file of another
// type where it keeps its own directory or object. The store neither
// follows nor replaces it.
var ErrDamaged = errors.New("the blob store holds something it did not put there")

// Open returns the store in the existing directory dir, creating its
// objects and tmp directories if they are missing. dir's last component
// must not be a symlink.
func Open(dir string) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open blob store %s: %w", dir, err)
	}
	r, err := fsx.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("open blob store %s: %w", abs, err)
	}
	defer r.Close()
	return OpenIn(r)
}

// OpenIn returns the store in the directory of r, creating its objects and
// tmp directories if they are missing. The store keeps handles of its own:
// r may be closed once OpenIn returns. Close releases them.
func OpenIn(r *fsx.Root) (*Store, error) {
	s := &Store{path: r.Path()}
	root, err := r.OpenDir(".")
	if err != nil {
		return nil, fmt.Errorf("open blob store %s: %w", s.path, err)
	}
	s.root = root
	for _, sub := range []struct {
		p    *atomic.Pointer[fsx.Dir]
		name string
	}{{&s.objects, objectsDir}, {&s.tmp, tmpDir}} {
		d, err := subdir(root, sub.name, true)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("open blob store %s: %w", s.path, s.damaged(err))
		}
		sub.p.Store(d)
	}
	return s, nil
}

// Close releases the store's directory handles. The store must not be used
// afterwards.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	closeDir := func(d *fsx.Dir) {
		if d != nil {
			errs = append(errs, d.Close())
		}
	}
	for i := range s.prefixes {
		closeDir(s.prefixes[i].Swap(nil))
	}
	closeDir(s.objects.Swap(nil))
	closeDir(s.tmp.Swap(nil))
	for _, d := range s.stale {
		closeDir(d)
	}
	s.stale = nil
	closeDir(s.root)
	s.root = nil
	return errors.Join(errs...)
}

// Dir returns the store's directory as an absolute path.
func (s *Store) Dir() string { return s.path }

// Path returns the file name of the object d, whether or not it is stored,
// or "" if d is not valid. It is for messages: the store itself never opens
// an object by its path.
func (s *Store) Path(d Digest) string {
	h := d.Hex()
	if h == "" {
		return ""
	}
	return filepath.Join(s.path, objectsDir, h[:2], h[2:])
}

// hexOf is d's hex digits, or an error wrapping ErrInvalidDigest naming op.
func hexOf(op string, d Digest) (string, error) {
	h := d.Hex()
	if h == "" {
		return "", fmt.Errorf("%s blob %q: %w", op, string(d), ErrInvalidDigest)
	}
	return h, nil
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
	f, tdir, tmp, err := s.createTemp()
	if err != nil {
		return "", 0, fmt.Errorf("put blob: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()            // a second Close after a successful one is harmless
			_ = tdir.Unlink(tmp) // best effort: CleanTemp removes leftovers
			err = fmt.Errorf("put blob %s: %w", f.Name(), err)
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
	// An object already there is replaced: the fresh copy is known good
	// (damage heals) and young (a collector's grace protects it).
	err = s.inPrefix(d.Hex(), true, func(pd *fsx.Dir, name string) error {
		if err := tdir.Rename(tmp, pd, name); err != nil {
			return err
		}
		return syncDir(pd)
	})
	if err != nil {
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
// the directory if something removed it, and returns it with the directory
// and its name there.
func (s *Store) createTemp() (*os.File, *fsx.Dir, string, error) {
	t := s.tmp.Load()
	f, name, err := t.CreateTemp(tmpPrefix)
	if errors.Is(err, fs.ErrNotExist) {
		if t, err = s.top(&s.tmp, tmpDir, t); err != nil {
			return nil, nil, "", s.damaged(err)
		}
		f, name, err = t.CreateTemp(tmpPrefix)
	}
	return f, t, name, s.damaged(err)
}

// smallBufs holds the buffers small objects are read into: one byte more
// than the largest small file (see fsx.File.ReadSmall).
var smallBufs = sync.Pool{New: func() any { b := make([]byte, smallObject+1); return &b }}

// smallObject is the size under which an object is read and written whole.
const smallObject = 64 << 10

// writeTemp writes data into a new temporary file with the object's mode
// and returns the directory and its name there; the file is not synced.
func (s *Store) writeTemp(data []byte) (*fsx.Dir, string, error) {
	t := s.tmp.Load()
	f, name, err := t.CreateTempFile(tmpPrefix, objectPerm)
	if errors.Is(err, fs.ErrNotExist) {
		if t, err = s.top(&s.tmp, tmpDir, t); err != nil {
			return nil, "", s.damaged(err)
		}
		f, name, err = t.CreateTempFile(tmpPrefix, objectPerm)
	}
	if err != nil {
		return nil, "", s.damaged(err)
	}
	err = f.WriteAt(data, 0)
	if err == nil && !fsx.ExactPerm(objectPerm) {
		err = f.Chmod(objectPerm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = t.Unlink(name) // best effort: CleanTemp removes leftovers
		return nil, "", err
	}
	return t, name, nil
}

// openSmall reads the object d whole into buf when it is shorter than buf
// (smallObject+1 bytes: under 64 KiB); a larger object is returned open
// instead, for the caller to read as a stream and close. Errors are as for
// [Store.Open].
func (s *Store) openSmall(op string, d Digest, buf []byte) (f *fsx.File, data []byte, err error) {
	h, err := hexOf(op, d)
	if err != nil {
		return nil, nil, err
	}
	err = s.inPrefix(h, false, func(pd *fsx.Dir, name string) error {
		data, f, err = pd.ReadSmallFile(name, buf)
		return err
	})
	if err != nil {
		return nil, nil, s.missing(op, d, err)
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

// Has reports whether the object d is stored. It is false for an invalid d.
func (s *Store) Has(d Digest) bool {
	st, err := s.Stat(d)
	return err == nil && st.IsRegular()
}

// Stat describes the stored file of the object d, as lstat does: its size
// and when its content was last stored (its mtime). Errors are as for
// [Store.Open].
func (s *Store) Stat(d Digest) (fsx.Stat, error) {
	h, err := hexOf("stat", d)
	if err != nil {
		return fsx.Stat{}, err
	}
	var st fsx.Stat
	err = s.inPrefix(h, false, func(pd *fsx.Dir, name string) error {
		st, err = pd.Lstat(name)
		return err
	})
	if err != nil {
		return fsx.Stat{}, s.missing("stat", d, err)
	}
	return st, nil
}

// Open opens the object d for reading. If d is not stored, the error wraps
// [fs.ErrNotExist]; if d is not valid, it wraps [ErrInvalidDigest]; if
// something else than an object file is found in its place (a symlink, a
// directory), it wraps [ErrDamaged].
func (s *Store) Open(d Digest) (*os.File, error) {
	h, err := hexOf("open", d)
	if err != nil {
		return nil, err
	}
	var f *os.File
	err = s.inPrefix(h, false, func(pd *fsx.Dir, name string) error {
		f, err = pd.OpenFile(name)
		return err
	})
	if err != nil {
		return nil, s.missing("open", d, err)
	}
	return f, nil
}

// missing wraps err, and ErrMissing when err says the object is not there,
// or ErrDamaged when what is there is not the store's.
func (s *Store) missing(op string, d Digest, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s blob %s: %w: %w", op, d, ErrMissing, err)
	}
	return fmt.Errorf("%s blob %s: %w", op, d, s.damaged(err))
}

// damaged wraps ErrDamaged, and the store's path, around an error that
// says an entry of the store is a symlink, a mount point or of the wrong
// type.
func (s *Store) damaged(err error) error {
	if err == nil || errors.Is(err, ErrDamaged) {
		return err
	}
	if errors.Is(err, fsx.ErrSymlink) || errors.Is(err, fsx.ErrCrossDevice) ||
		errors.Is(err, fsx.ErrNotDir) || errors.Is(err, fsx.ErrNotRegular) {
		return fmt.Errorf("%w (in %s): %w", ErrDamaged, s.path, err)
	}
	return err
}

// ReadAll returns the content of the object d, checked against d: content
// that no longer hashes to d is an error wrapping [ErrCorrupt]. Other errors
// are as for [Store.Open].
func (s *Store) ReadAll(d Digest) ([]byte, error) {
	buf := smallBufs.Get().(*[]byte)
	defer smallBufs.Put(buf)
	f, data, err := s.openSmall("read", d, *buf)
	if err != nil {
		return nil, err
	}
	if f == nil {
		data = bytes.Clone(data)
	} else {
		defer f.Close()
		b := make([]byte, 0, f.Stat().Size)
		w := bytes.NewBuffer(b)
		if _, err := f.ReadTo(w, nil); err != nil {
			return nil, fmt.Errorf("read blob %s: %w", d, err)
		}
		data = w.Bytes()
	}
	if got := Sum(data); got != d {
		return nil, corrupt("read", d, got)
	}
	return data, nil
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
	h, err := hexOf("remove", d)
	if err != nil {
		return err
	}
	err = s.inPrefix(h, false, func(pd *fsx.Dir, name string) error { return pd.Unlink(name) })
	if err != nil {
		return fmt.Errorf("remove blob %s: %w", d, s.damaged(err))
	}
	return nil
}

// Walk calls fn for every stored object with its digest and size, in
// lexical order of digest. Files in the objects directory that do not name a
// valid object are skipped; a symlink, a mount point or a file where a
// directory of objects belongs is an error wrapping [ErrDamaged]. Walk
// stops at the first error from fn, or when ctx is done, and returns that
// error.
func (s *Store) Walk(ctx context.Context, fn func(d Digest, size int64) error) error {
	objs := s.objects.Load()
	prefixes, err := objs.ReadDir()
	if err != nil {
		return fmt.Errorf("walk blobs %s: %w", filepath.Join(s.path, objectsDir), err)
	}
	for _, p := range prefixes {
		if len(p) != 2 || !Digest(prefix+p+strings.Repeat("0", 62)).Valid() {
			continue
		}
		if err := s.walkPrefix(ctx, p, fn); err != nil {
			return err
		}
	}
	return nil
}

// walkPrefix is Walk over the objects under objects/p.
func (s *Store) walkPrefix(ctx context.Context, p string, fn func(d Digest, size int64) error) error {
	where := filepath.Join(s.path, objectsDir, p)
	pd, err := s.prefix(p, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // removed since the listing
	}
	if err != nil {
		return fmt.Errorf("walk blobs %s: %w", where, s.damaged(err))
	}
	names, err := pd.ReadDir()
	if err != nil {
		return fmt.Errorf("walk blobs %s: %w", where, err)
	}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("walk blobs %s: %w", where, err)
		}
		d := Digest(prefix + p + name)
		if !d.Valid() {
			continue
		}
		st, err := pd.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the listing
		}
		if err != nil {
			return fmt.Errorf("walk blobs %s: %w", where, err)
		}
		if !st.IsRegular() {
			continue
		}
		if err := fn(d, st.Size); err != nil {
			return err
		}
	}
	return nil
}

// CleanTemp removes temporary files last modified before cutoff, left behind
// by writers that crashed, and returns how many it removed. Pass a cutoff
// well in the past so that writes still in progress are not disturbed.
func (s *Store) CleanTemp(cutoff time.Time) (int, error) {
	t := s.tmp.Load()
	where := filepath.Join(s.path, tmpDir)
	names, err := t.ReadDir()
	if err != nil {
		return 0, fmt.Errorf("clean blob temp %s: %w", where, err)
	}
	removed := 0
	for _, name := range names {
		if !strings.HasPrefix(name, tmpPrefix) {
			continue
		}
		st, err := t.Lstat(name)
		if err != nil || st.Mtime >= cutoff.UnixNano() {
			continue
		}
		if err := t.Unlink(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, fmt.Errorf("clean blob temp %s: %w", where, err)
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

// syncDir makes the entries of the directory d durable. File systems that
// cannot sync a directory are tolerated.
func syncDir(d *fsx.Dir) error {
	err := d.Sync()
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) || errors.Is(err, errors.ErrUnsupported) {
		err = nil
	}
	return err
}
