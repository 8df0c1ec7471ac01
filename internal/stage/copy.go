package stage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/tree"
)

// ErrSpecial is wrapped by errors about FIFOs, sockets and devices, which
// wtx neither stages nor applies.
var ErrSpecial = errors.New("special files are not staged")

// Copy is the backend that copies every byte of the surface into the view.
// It works everywhere; it never hard-links, so a staged file never shares an
// inode with its workspace file. The view is frozen at open.
type Copy struct{}

// Name returns "copy".
func (Copy) Name() string { return "copy" }

// Probe always succeeds: copying works on every filesystem.
func (Copy) Probe(ctx context.Context, workspace, stateDir string) error { return nil }

const viewDirName = "view"

// Open copies the workspace's surface into req.Dir/view.
func (Copy) Open(ctx context.Context, req OpenRequest) (View, *tree.Manifest, error) {
	m, err := openTree(ctx, req, "copy", copyFile)
	if err != nil {
		return nil, nil, err
	}
	v, err := attachCopy(req.Workspace, req.Dir)
	if err != nil {
		return nil, nil, err
	}
	return v, m, nil
}

// putFunc puts the content of src (closed on return) in a new file at dst
// and records in e the view's stat tuple and, if it read the bytes, the
// digest.
type putFunc func(src *os.File, dst string, e *tree.Entry) error

// openTree builds req.Dir/view as a tree like the workspace's surface,
// putting each file there with put, and returns the base manifest.
func openTree(ctx context.Context, req OpenRequest, backend string, put putFunc) (*tree.Manifest, error) {
	if len(req.Share) > 0 {
		return nil, fmt.Errorf("--share needs a backend that can bind a directory into the view (overlay), not %s: %w", backend, ErrUnsupported)
	}
	ws, err := fsx.OpenRoot(req.Workspace)
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	viewDir := filepath.Join(req.Dir, viewDirName)
	if err := os.Mkdir(viewDir, 0o700); err != nil {
		return nil, err
	}
	var (
		entries []*tree.Entry
		dirs    []*tree.Entry
		done    int
		mu      sync.Mutex
	)
	pool := newHashPool(func(j hashJob) error {
		return put(j.f.(*os.File), filepath.Join(viewDir, filepath.FromSlash(j.e.Path)), j.e)
	})
	werr := walk(ctx, ws, req.Exclude, func(rel string, d *fsx.Dir, name string, st fsx.Stat) error {
		if pool.failed() {
			return errStopWalk
		}
		e := entryFromStat(rel, st)
		e.WS = statTuple(st)
		ep := &e
		dst := filepath.Join(viewDir, filepath.FromSlash(rel))
		switch e.Type {
		case tree.Dir:
			if err := os.Mkdir(dst, 0o700); err != nil {
				return err
			}
			dirs = append(dirs, ep)
		case tree.Symlink:
			target, err := d.Readlink(name)
			if err != nil {
				return retyped(d, name, rel, st, err)
			}
			ep.Target, ep.Size = target, int64(len(target))
			if err := os.Symlink(target, dst); err != nil {
				return err
			}
		case tree.File:
			f, err := d.OpenFile(name)
			if err != nil {
				return retyped(d, name, rel, st, fmt.Errorf("stage %s: %w", rel, err))
			}
			pool.jobs <- hashJob{e: ep, f: f}
		case tree.Special:
			// Left out of the view; recorded so that it is never reported
			// as deleted.
		}
		entries = append(entries, ep)
		mu.Lock()
		done++
		if req.Progress != nil && done%1024 == 0 {
			req.Progress(done)
		}
		mu.Unlock()
		return nil
	})
	perr := pool.wait()
	if werr == errStopWalk {
		werr = nil
	}
	if err := errors.Join(werr, perr); err != nil {
		return nil, err
	}
	// Directory bits and times last, deepest first, so that read-only
	// directories are filled before they close and their times stick.
	for i := len(dirs) - 1; i >= 0; i-- {
		e := dirs[i]
		dst := filepath.Join(viewDir, filepath.FromSlash(e.Path))
		if err := os.Chmod(dst, fs.FileMode(e.Perm)); err != nil {
			return nil, err
		}
		t := time.Unix(0, e.WS.Mtime)
		if err := os.Chtimes(dst, t, t); err != nil {
			return nil, err
		}
	}
	// The view's root gets the workspace root's bits (the stage directory
	// around it stays private).
	if rst, err := ws.Lstat("."); err == nil {
		if err := os.Chmod(viewDir, rst.Mode.Perm()); err != nil {
			return nil, err
		}
	}
	m := &tree.Manifest{Entries: make([]tree.Entry, len(entries))}
	var maxView int64
	for i, e := range entries {
		m.Entries[i] = *e
		maxView = max(maxView, e.View.Ctime, e.View.Mtime)
	}
	tree.SortEntries(m.Entries)
	fence, err := fenceAfter(req.Dir, maxView)
	if err != nil {
		return nil, err
	}
	m.Fence, m.ViewFence = fence, fence
	// A file that changed within the racy window of the fence cannot be
	// proved unchanged by its tuple later: a backend that did not read it
	// reads its staged copy now, while it is known to equal the base.
	if err := hashRacy(ctx, m, func(e *tree.Entry) (*os.File, error) {
		return os.Open(filepath.Join(viewDir, filepath.FromSlash(e.Path)))
	}); err != nil {
		return nil, err
	}
	return m, nil
}

var errStopWalk = errors.New("stop walk")

// refuseConfinement refuses a run that must be confined (see
// RunOptions.Confine) where a copy or clone view's command cannot be.
func refuseConfinement(backend string, opts RunOptions) error {
	if CanConfineViews() || !opts.mustConfine() {
		return nil
	}
	why := fmt.Sprintf("the %s backend confines a command only in namespaces of its own, which cannot be made here", backend)
	switch {
	case opts.ReadOnly:
		return confinementErrorf("cannot make the view read-only: %s", why)
	case opts.NoNetwork:
		return confinementErrorf("cannot cut the command off the network: %s", why)
	}
	return confinementErrorf("cannot confine the command to its view: %s", why)
}

// copyFile copies src (closed on return) to a new file at dst, hashing the
// bytes on the way, and records the digest and the new file's stat tuple.
// A sparse file's holes are not filled.
func copyFile(src *os.File, dst string, e *tree.Entry) (err error) {
	defer src.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	// Holes stay holes in the view (SEEK_DATA/SEEK_HOLE); the digest is
	// over the logical content.
	h := blob.NewHasher()
	n, err := fsx.CopySparse(context.Background(), out, src, h)
	if err != nil {
		return fmt.Errorf("stage %s: %w", e.Path, err)
	}
	st, err := src.Stat()
	if err != nil {
		return err
	}
	if n != st.Size() || st.ModTime().UnixNano() != e.WS.Mtime || viewTuple(st).Ino != e.WS.Ino {
		return fmt.Errorf("stage %s: file changed while it was being copied: %w", e.Path, ErrUnstable)
	}
	e.Digest, e.Size = string(h.Digest()), n
	if err := out.Chmod(fs.FileMode(e.Perm)); err != nil {
		return err
	}
	t := time.Unix(0, e.WS.Mtime)
	if err := os.Chtimes(dst, t, t); err != nil {
		return err
	}
	fi, err := out.Stat()
	if err != nil {
		return err
	}
	e.View = viewTuple(fi)
	return nil
}

// ErrViewInDoubt is wrapped by errors about a stage whose view was being
// written when the machine stopped: what the command wrote may be
// incomplete (see volatile_linux.go).
var ErrViewInDoubt = errors.New("the stage's view was being written when the system stopped, so what the command wrote may be incomplete")

// ErrUnstable is wrapped by errors about files that changed while wtx read
// them.
var ErrUnstable = errors.New("file changed while being read")

// fenceAfter returns a filesystem time from dir's filesystem that is
// strictly later than after, waiting for the clock to tick when needed.
func fenceAfter(dir string, after int64) (int64, error) {
	marker := filepath.Join(dir, "fence")
	deadline := time.Now().Add(3 * time.Second)
	for {
		f, err := os.OpenFile(marker, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return 0, err
		}
		_, err = f.Write([]byte{1})
		fi, serr := f.Stat()
		f.Close()
		if err = errors.Join(err, serr); err != nil {
			return 0, err
		}
		t := fi.ModTime().UnixNano()
		if ct := ctimeOf(fi); ct > t {
			t = ct
		}
		if t > after || time.Now().After(deadline) {
			os.Remove(marker)
			return t, nil
		}
		time.Sleep(time.Millisecond)
	}
}

// Attach returns the view that Open made in dir.
func (Copy) Attach(ctx context.Context, workspace, dir string) (View, error) {
	return attachCopy(workspace, dir)
}

func attachCopy(workspace, dir string) (*copyView, error) {
	root := filepath.Join(dir, viewDirName)
	fi, err := os.Lstat(root)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("view %s is not a directory", root)
	}
	return &copyView{root: root, workspace: workspace}, nil
}

var (
	_ Backend = Copy{}
	_ View    = (*copyView)(nil)

	_ FileOps         = (*copyView)(nil)
	_ RawOpener       = (*copyView)(nil)
	_ RootModer       = (*copyView)(nil)
	_ LeftOutReporter = (*copyView)(nil)
)

type copyView struct {
	root      string
	workspace string
	leftOutSet
	raw rawOpener
}

func (v *copyView) Root() string { return v.root }

// workspacePath is the workspace the view stages (see workspaceView).
func (v *copyView) workspacePath() string { return v.workspace }

// digestCache is the stage's digest cache: the stage directory holds the
// view, and a command running in it locks the view's root.
func (v *copyView) digestCache() *digestCache { return openDigestCache(filepath.Dir(v.root), v.root) }

func (v *copyView) Close() error {
	v.raw.close()
	return nil
}

// OpenRaw opens the staged regular file rel as an fsx.File (see RawOpener).
func (v *copyView) OpenRaw(rel string) (*fsx.File, bool, error) { return v.raw.open(v.root, rel) }

func (v *copyView) Prepare(cmd *exec.Cmd, opts RunOptions) error {
	if err := refuseConfinement("copy", opts); err != nil {
		return err
	}
	if cmd.Dir == "" || !filepath.IsAbs(cmd.Dir) {
		cmd.Dir = filepath.Join(v.root, cmd.Dir)
	}
	return nil
}

func (v *copyView) OpenFile(rel string) (*os.File, error) {
	return openInRoot(v.root, rel)
}

func (v *copyView) Readlink(rel string) (string, error) {
	return readlinkInRoot(v.root, rel)
}

// Scan walks the view and hashes only the files whose stat tuple moved.
func (v *copyView) Scan(ctx context.Context, base *tree.Manifest, exclude tree.Selectors) ([]tree.Entry, error) {
	cache := v.digestCache()
	es, err := scanTree(ctx, v.root, base, exclude, true, &v.leftOutSet, cache)
	if err != nil {
		return nil, err
	}
	cache.save()
	return es, nil
}

// scanTree lists the tree at dir. When viewTuples is set, a file whose
// stat tuple equals the base entry's View tuple (and is not racy) takes the
// base digest; otherwise its digest comes from cache when it knows the
// file at its tuple, or it is hashed.
//
// The view holds nothing the exclude selectors cover when it is made, so
// whatever they cover in it now a command wrote: it is left out, and
// recorded in leftOut.
func scanTree(ctx context.Context, dir string, base *tree.Manifest, exclude tree.Selectors, viewTuples bool, leftOut *leftOutSet, cache *digestCache) ([]tree.Entry, error) {
	root, err := fsx.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	var mu sync.Mutex // guards entries and hashed: the walk reads directories on several goroutines
	var entries, hashed []*tree.Entry
	pool := newDigestPool("scan")
	leftOut.reset()
	opts := &walkOpts{exclude: exclude, keepReserved: !failpoint.Disabled("reserved"), excluded: leftOut.excludedVisit(), workers: runtime.GOMAXPROCS(0)}
	werr := walkTree(ctx, root, opts, func(rel string, d *fsx.Dir, name string, st fsx.Stat) error {
		if pool.failed() {
			return errStopWalk
		}
		e := entryFromStat(rel, st)
		ep := &e
		switch e.Type {
		case tree.Symlink:
			target, err := d.Readlink(name)
			if err != nil {
				return retyped(d, name, rel, st, err)
			}
			ep.Target, ep.Size = target, int64(len(target))
		case tree.File:
			ep.View = statTuple(st)
			ep.View.Dev = 0
			if b := base.Lookup(rel); viewTuples && b != nil && b.Type == tree.File && b.Perm == ep.Perm &&
				b.View == ep.View && !base.ViewRacy(b) {
				// Unchanged since staging; a lazy backend may not know
				// the digest yet.
				ep.Digest, ep.Unchanged = b.Digest, b.Digest == ""
			} else if dg, ok := cache.lookup(sideView, rel, ep.View); ok {
				ep.Digest = dg
			} else {
				cache.takeFence()
				f, err := d.OpenFile(name)
				if err != nil {
					return retyped(d, name, rel, st, fmt.Errorf("scan %s: %w", rel, err))
				}
				pool.jobs <- hashJob{e: ep, f: f}
				mu.Lock()
				hashed = append(hashed, ep)
				mu.Unlock()
			}
		}
		mu.Lock()
		entries = append(entries, ep)
		mu.Unlock()
		return nil
	})
	perr := pool.wait()
	if werr == errStopWalk {
		werr = nil
	}
	if err := errors.Join(werr, perr); err != nil {
		return nil, err
	}
	for _, e := range hashed {
		cache.learn(sideView, e.Path, e.View, e.Digest)
	}
	out := make([]tree.Entry, len(entries))
	for i, e := range entries {
		out[i] = *e
	}
	tree.SortEntries(out)
	return out, nil
}

func openInRoot(root, rel string) (*os.File, error) {
	r, err := fsx.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	d, err := r.OpenDir(tree.Parent(rel))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.OpenFile(tree.Base(rel))
}

func readlinkInRoot(root, rel string) (string, error) {
	r, err := fsx.OpenRoot(root)
	if err != nil {
		return "", err
	}
	defer r.Close()
	d, err := r.OpenDir(tree.Parent(rel))
	if err != nil {
		return "", err
	}
	defer d.Close()
	return d.Readlink(tree.Base(rel))
}
