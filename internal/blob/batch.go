package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/wtx-dev/wtx/internal/fsx"
)

// Batch stores many objects with two filesystem-wide syncs in all instead
// of two fsyncs each. Objects put into a batch are written to temporary
// files and become visible (and durable) only when Commit returns: a name
// under objects/ never holds content that is not yet on disk.
//
// Put and PutFile may be called from many goroutines at once; Commit and
// Abort run once every put has returned.
type Batch struct {
	s *Store
	// mu guards the fields below.
	mu      sync.Mutex
	pending []pending
	// seen holds the digests put so far (stored, or being written).
	seen map[Digest]bool
	// held keeps the content of small objects put with PutFile, up to
	// heldLimit bytes in all, for Held.
	held      map[Digest][]byte
	heldBytes int
}

// heldLimit bounds the bytes a batch keeps for Held.
const heldLimit = 16 << 20

type pending struct {
	dir *fsx.Dir // the tmp directory that holds tmp
	tmp string
	d   Digest
	n   int64
}

// NewBatch starts a batch.
func (s *Store) NewBatch() *Batch { return &Batch{s: s, seen: map[Digest]bool{}} }

// Put reads r to its end into a temporary object and returns its digest
// and length. The object is stored by Commit.
func (b *Batch) Put(ctx context.Context, r io.Reader) (Digest, int64, error) {
	if err := ctx.Err(); err != nil {
		return "", 0, fmt.Errorf("put blob: %w", err)
	}
	f, dir, tmp, err := b.s.createTemp()
	if err != nil {
		return "", 0, fmt.Errorf("put blob: %w", err)
	}
	h := NewHasher()
	n, err := copyIn(ctx, f, r, h)
	if err == nil {
		err = f.Chmod(objectPerm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = dir.Unlink(tmp) // best effort: CleanTemp removes leftovers
		return "", 0, fmt.Errorf("put blob %s: %w", f.Name(), err)
	}
	d := h.Digest()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen[d] {
		_ = dir.Unlink(tmp) // a copy of what the batch holds already
		return d, n, nil
	}
	b.seen[d] = true
	b.pending = append(b.pending, pending{dir: dir, tmp: tmp, d: d, n: n})
	return d, n, nil
}

// PutFile stores the content of f, read from its start to its end, like
// Put. A file under 64 KiB is read with one call and its object written
// with one; content the batch holds already is not written again.
func (b *Batch) PutFile(ctx context.Context, f *fsx.File) (Digest, int64, error) {
	if err := ctx.Err(); err != nil {
		return "", 0, fmt.Errorf("put blob: %w", err)
	}
	buf := smallBufs.Get().(*[]byte)
	defer smallBufs.Put(buf)
	data, ok, err := f.ReadSmall(*buf)
	if err != nil {
		return "", 0, fmt.Errorf("put blob: %w", err)
	}
	if !ok {
		o, err := f.Dup()
		if err != nil {
			return "", 0, fmt.Errorf("put blob: %w", err)
		}
		defer o.Close()
		return b.Put(ctx, o)
	}
	d, n := Sum(data), int64(len(data))
	// The digest is claimed before its object is written, so that two
	// puts of one content write it once; a failed write gives it back.
	b.mu.Lock()
	if b.seen[d] {
		b.mu.Unlock()
		return d, n, nil
	}
	b.seen[d] = true
	b.mu.Unlock()
	dir, tmp, err := b.s.writeTemp(data)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		delete(b.seen, d)
		return "", 0, fmt.Errorf("put blob: %w", err)
	}
	if b.heldBytes+len(data) <= heldLimit {
		if b.held == nil {
			b.held = map[Digest][]byte{}
		}
		b.held[d] = append([]byte(nil), data...)
		b.heldBytes += len(data)
	}
	b.pending = append(b.pending, pending{dir: dir, tmp: tmp, d: d, n: n})
	return d, n, nil
}

// Held returns the content of the object d when the batch put it with
// PutFile and kept it (small objects, up to a bound in all): it hashed to
// d as it was read, and whoever writes it next need not read it back from
// the store. The slice must not be modified.
func (b *Batch) Held(d Digest) ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	data, ok := b.held[d]
	return data, ok
}

// Commit makes every object of the batch durable and visible: the
// temporary files are synced, renamed into place, and the renames synced.
// Each sync is one syncfs of the store's filesystem while little else is
// dirty (fsx.BulkSync), else an fsync of each file, then of each prefix
// directory, a few at a time. After an error the batch's remaining
// temporary files are removed.
func (b *Batch) Commit() (err error) {
	defer func() {
		if err != nil {
			b.Abort()
		}
	}()
	if len(b.pending) == 0 {
		return nil
	}
	bulk := fsx.BulkSync(len(b.pending))
	if bulk {
		err := b.s.root.SyncFS()
		if errors.Is(err, errors.ErrUnsupported) {
			bulk = false
		} else if err != nil {
			return fmt.Errorf("commit blobs: %w", err)
		}
	}
	if !bulk {
		err := fsx.Each(len(b.pending), fsx.SyncInFlight, func(i int) error {
			if err := syncTemp(b.pending[i]); err != nil {
				return fmt.Errorf("commit blob %s: %w", b.pending[i].d, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	dirs, err := b.place()
	if err != nil {
		return err
	}
	if bulk {
		if err := b.s.root.SyncFS(); err != nil {
			return fmt.Errorf("commit blobs: %w", err)
		}
	} else {
		err := fsx.Each(len(dirs), fsx.SyncInFlight, func(i int) error {
			if err := syncDir(dirs[i]); err != nil {
				return fmt.Errorf("commit blobs: %w", err)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	b.pending = nil
	return nil
}

// place renames every temporary file of the batch to its object's name
// and returns the prefix directories that received one. An object there
// is replaced, as by Store.Put: damage heals and a reused object is young
// again.
func (b *Batch) place() ([]*fsx.Dir, error) {
	seen := map[*fsx.Dir]bool{}
	var dirs []*fsx.Dir
	for i, p := range b.pending {
		var to *fsx.Dir
		err := b.s.inPrefix(p.d.Hex(), true, func(pd *fsx.Dir, name string) error {
			to = pd
			return p.dir.Rename(p.tmp, pd, name)
		})
		if err != nil {
			return nil, fmt.Errorf("commit blob %s: %w", p.d, err)
		}
		b.pending[i].tmp = ""
		if !seen[to] {
			seen[to] = true
			dirs = append(dirs, to)
		}
	}
	return dirs, nil
}

// Abort removes the batch's temporary files; nothing of it is stored.
func (b *Batch) Abort() {
	for _, p := range b.pending {
		if p.tmp != "" {
			_ = p.dir.Unlink(p.tmp) // best effort: CleanTemp removes leftovers
		}
	}
	b.pending = nil
}

// syncTemp makes the content of p's temporary file durable.
func syncTemp(p pending) error {
	f, err := p.dir.Open(p.tmp)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
