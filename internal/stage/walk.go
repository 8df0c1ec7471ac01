package stage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"strings"
	"sync"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/journal"
	"github.com/wtx-dev/wtx/internal/tree"
)

// visitFunc is called by walk for every entry beneath the root except those
// excluded. d is the entry's parent directory, open for the call only.
type visitFunc func(rel string, d *fsx.Dir, name string, st fsx.Stat) error

// walk visits the tree under root depth first, parents before children,
// never following a symlink. Excluded paths and everything beneath them are
// skipped, and so are names under wtx's reserved prefix (an apply's
// temporary files, which recovery owns): walk is for the workspace.
func walk(ctx context.Context, root *fsx.Root, exclude tree.Selectors, visit visitFunc) error {
	return walkTree(ctx, root, &walkOpts{exclude: exclude}, visit)
}

type walkOpts struct {
	exclude      tree.Selectors
	keepReserved bool
	excluded     visitFunc
	// enter, if set, is called with each directory the walk opened to
	// read, right after its visit, before anything beneath it.
	enter func(rel string, d *fsx.Dir) error
	// skip, if set, is asked about every entry not excluded, before its
	// visit: an entry it skips is not visited and nothing beneath it read.
	skip func(rel string, st fsx.Stat) bool
	// workers > 1 reads directories on up to that many goroutines: the
	// callbacks may then be called concurrently and in any order, a
	// directory's visit and enter still before anything beneath it.
	// Otherwise the walk is depth first in bytewise order on the caller's
	// goroutine.
	workers int
}

func walkTree(ctx context.Context, root *fsx.Root, o *walkOpts, visit visitFunc) error {
	d, err := root.OpenDir(".")
	if err != nil {
		return err
	}
	return walkFrom(ctx, d, "", o, visit)
}

// walkFrom walks beneath the open directory d, whose path followed by a
// slash is prefix ("" for the root), and closes d.
func walkFrom(ctx context.Context, d *fsx.Dir, prefix string, o *walkOpts, visit visitFunc) error {
	w := &walker{ctx: ctx, o: o, visit: visit}
	if o.workers > 1 {
		w.sem = make(chan struct{}, o.workers-1)
	}
	w.dir(d, prefix)
	w.wg.Wait()
	return w.err
}

// walker is one walk: the first error stops it and is what it returns.
type walker struct {
	ctx   context.Context
	o     *walkOpts
	visit visitFunc
	sem   chan struct{} // nil: never a goroutine of its own
	wg    sync.WaitGroup
	mu    sync.Mutex
	err   error
}

func (w *walker) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

func (w *walker) failed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err != nil
}

// dir walks the entries of d (closed on return), descending into each
// subdirectory on a new goroutine while one is free, inline otherwise.
func (w *walker) dir(d *fsx.Dir, prefix string) {
	defer d.Close()
	names, err := d.ReadDir()
	if err != nil {
		w.fail(err)
		return
	}
	o := w.o
	for _, name := range names {
		if err := w.ctx.Err(); err != nil {
			w.fail(err)
			return
		}
		if w.sem != nil && w.failed() {
			return
		}
		rel := prefix + name
		if !o.keepReserved && strings.HasPrefix(name, journal.TempPrefix) {
			continue // an apply's temporary name: recovery's, never part of a surface
		}
		if o.exclude.Match(rel) {
			if o.excluded != nil {
				st, err := d.Lstat(name)
				if gone(err) {
					continue
				}
				if err == nil {
					err = o.excluded(rel, d, name, st)
				}
				if err != nil {
					w.fail(err)
					return
				}
			}
			continue
		}
		st, err := d.Lstat(name)
		if gone(err) {
			continue // removed since the directory was read: see errGone
		}
		if err != nil {
			w.fail(err)
			return
		}
		if o.skip != nil && o.skip(rel, st) {
			continue
		}
		if err := w.visit(rel, d, name, st); err != nil {
			if errors.Is(err, errGone) {
				continue
			}
			w.fail(err)
			return
		}
		if !st.Mode.IsDir() {
			continue
		}
		child, err := d.OpenDir(name)
		if err != nil {
			err = retyped(d, name, rel, st, err)
		}
		if errors.Is(err, errGone) {
			continue // removed after its visit, with what it held
		}
		if err == nil && o.enter != nil {
			if err = o.enter(rel, child); err != nil {
				child.Close()
			}
		}
		if err != nil {
			w.fail(err)
			return
		}
		select {
		case w.sem <- struct{}{}:
			w.wg.Add(1)
			go func() {
				defer w.wg.Done()
				defer func() { <-w.sem }()
				w.dir(child, rel+"/")
			}()
		default:
			w.dir(child, rel+"/")
			if w.failed() {
				return
			}
		}
	}
}

// A name removed between the read of its directory and the walk's lstat
// (or open) of it is walked as if it had been removed just before: it is
// left out. Deletions under a walk are routine in a working tree (git gc
// pruning loose objects, a build cleaning up): refusing the stage for them
// would refuse it for no reason, and a name seen absent is what the tree
// held at some instant of the walk, as every other name it records. Only
// ENOENT counts: any other failure still stops the walk. A visit reports a
// name gone with errGone (see vanished), and only for a call on the name
// itself (its open, its readlink), never for one on wtx's own files.
var errGone = errors.New("removed while the tree was walked")

// gone reports whether err says the name no longer exists.
func gone(err error) bool {
	return err != nil && errors.Is(err, fs.ErrNotExist) && !failpoint.Disabled(disableWalkGone)
}

// vanished turns err, from a call a visit made on the walked name itself,
// into errGone when the name no longer exists.
func vanished(err error) error {
	if gone(err) {
		return errGone
	}
	return err
}

// retyped is vanished for a call on the walked name that needs the type
// the walk saw in st (a readlink, an open as a file or a directory): when
// the call failed and the name now has another type, it was replaced while
// the tree was walked, and the error says so (ErrUnstable: try again)
// rather than what the call met (EINVAL, ELOOP, ENOTDIR).
func retyped(d *fsx.Dir, name, rel string, st fsx.Stat, err error) error {
	if err == nil || gone(err) {
		return vanished(err)
	}
	now, lerr := d.Lstat(name)
	if gone(lerr) {
		return errGone
	}
	if lerr == nil && tree.TypeOf(now.Mode) != tree.TypeOf(st.Mode) {
		return fmt.Errorf("%s: a %s replaced by a %s while it was being staged: %w", rel, tree.TypeOf(st.Mode), tree.TypeOf(now.Mode), ErrUnstable)
	}
	return err
}

// disableWalkGone is the negative control's switch: a name removed under a
// walk stops it, as it did before walks left such names out.
const disableWalkGone = "walk-gone"

// entryFromStat fills the type, permission bits and size of an entry.
func entryFromStat(rel string, st fsx.Stat) tree.Entry {
	e := tree.Entry{Path: rel, Type: tree.TypeOf(st.Mode)}
	switch e.Type {
	case tree.File:
		e.Perm = uint32(st.Mode.Perm())
		e.Size = st.Size
	case tree.Dir:
		e.Perm = uint32(st.Mode.Perm())
	}
	return e
}

func statTuple(st fsx.Stat) tree.Stat {
	return tree.Stat{Ino: st.Ino, Dev: st.Dev, Size: st.Size, Mtime: st.Mtime, Ctime: st.Ctime}
}

// hashJob is a file to hash: f is open and is closed by the worker.
type hashJob struct {
	e *tree.Entry
	f io.ReadCloser
}

// hashPool hashes files on several goroutines and keeps the first error.
type hashPool struct {
	jobs chan hashJob
	wg   sync.WaitGroup
	mu   sync.Mutex
	err  error
}

func newHashPool(work func(j hashJob) error) *hashPool {
	n := runtime.GOMAXPROCS(0) * 2
	p := &hashPool{jobs: make(chan hashJob, 64)}
	for range n {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for j := range p.jobs {
				if p.failed() {
					j.f.Close()
					continue
				}
				if err := work(j); err != nil {
					p.fail(err)
				}
			}
		}()
	}
	return p
}

func (p *hashPool) failed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err != nil
}

func (p *hashPool) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
	}
}

// wait closes the queue, waits for the workers and returns the first error.
func (p *hashPool) wait() error {
	close(p.jobs)
	p.wg.Wait()
	return p.err
}

// newDigestPool is a hash pool that sets each job's entry digest, failing
// (with op in the message) when the file's length is not the size its stat
// said: it changed while being read.
func newDigestPool(op string) *hashPool {
	return newHashPool(func(j hashJob) error {
		defer j.f.Close()
		bp := bufPool.Get().(*[]byte)
		defer bufPool.Put(bp)
		d, n, err := hashFile(j.f, *bp)
		if err != nil {
			return fmt.Errorf("%s %s: %w", op, j.e.Path, err)
		}
		if n != j.e.Size {
			return fmt.Errorf("%s %s: %w", op, j.e.Path, ErrUnstable)
		}
		j.e.Digest = d
		return nil
	})
}

// hashFile hashes r fully and returns its digest and length.
func hashFile(r io.Reader, buf []byte) (string, int64, error) {
	h := blob.NewHasher()
	// A read loop, not io.CopyBuffer: an *os.File's WriteTo would take
	// over and allocate a buffer of its own for every file.
	var n int64
	for {
		k, err := r.Read(buf)
		if k > 0 {
			_, _ = h.Write(buf[:k]) // a hash never fails to write
			n += int64(k)
		}
		if err == io.EOF {
			return string(h.Digest()), n, nil
		}
		if err != nil {
			return "", n, err
		}
	}
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}
