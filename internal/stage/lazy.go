package stage

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/tree"
)

// hashRacy hashes, through open, every file of m whose digest is unknown
// and whose workspace tuple is racy, so that its base digest is known even
// though its tuple can never prove it unchanged. An entry whose open
// reports errGone (open says so only for a workspace name) is left out of m.
func hashRacy(ctx context.Context, m *tree.Manifest, open func(e *tree.Entry) (*os.File, error)) error {
	pool := newDigestPool("stage")
	var (
		err     error
		removed []int // indexes of entries removed since the walk, ascending
	)
	for i := range m.Entries {
		e := &m.Entries[i]
		if e.Type != tree.File || e.Digest != "" || !m.WSRacy(e) {
			continue
		}
		if err = ctx.Err(); err != nil {
			break
		}
		f, oerr := open(e)
		if errors.Is(oerr, errGone) {
			// Removed from the workspace since the walk saw it: left
			// out, as the walk leaves out what it finds removed.
			removed = append(removed, i)
			continue
		}
		if oerr != nil {
			err = fmt.Errorf("stage %s: %w", e.Path, oerr)
			break
		}
		pool.jobs <- hashJob{e: e, f: f}
	}
	if err = errors.Join(err, pool.wait()); err != nil {
		return err
	}
	// The hashing is done with the entries' addresses: only now may they move.
	if len(removed) > 0 {
		kept, r := m.Entries[:0], 0
		for i, e := range m.Entries {
			if r < len(removed) && removed[r] == i {
				r++
				continue
			}
			kept = append(kept, e)
		}
		m.Entries = kept
	}
	return nil
}

// fillBaseDigests computes, from the workspace, the unknown digests of the
// base files that the change between base and view touches: files deleted,
// replaced, or modified in the view. A workspace file whose stat tuple moved
// since the manifest (or is racy) is left with an unknown digest: it has
// drifted, and apply will refuse it. A digest cache keeps each digest
// found at its base tuple, so the next scan does not read the file again.
func fillBaseDigests(ctx context.Context, workspace string, base *tree.Manifest, view []tree.Entry, cache *digestCache) error {
	var need []*tree.Entry
	i, j := 0, 0
	for i < len(base.Entries) {
		b := &base.Entries[i]
		for j < len(view) && view[j].Path < b.Path {
			j++
		}
		i++
		if b.Type != tree.File || b.Digest != "" {
			continue
		}
		if j < len(view) && view[j].Path == b.Path {
			if v := &view[j]; v.Unchanged || (v.Type == tree.File && v.Digest == "") {
				continue
			}
		}
		if b.WS != (tree.Stat{}) && !base.WSRacy(b) {
			if d, ok := cache.lookup(sideBase, b.Path, b.WS); ok {
				b.Digest = d
				continue
			}
		}
		need = append(need, b)
	}
	if len(need) == 0 {
		return nil
	}
	ws, err := fsx.OpenRoot(workspace)
	if err != nil {
		return err
	}
	defer ws.Close()
	pool := newHashPool(func(j hashJob) error {
		defer j.f.Close()
		f := j.f.(*os.File)
		if !sameWSTuple(f, j.e) {
			return nil
		}
		bp := bufPool.Get().(*[]byte)
		defer bufPool.Put(bp)
		d, n, err := hashFile(f, *bp)
		if err != nil {
			return fmt.Errorf("scan %s: %w", j.e.Path, err)
		}
		if n == j.e.WS.Size && sameWSTuple(f, j.e) {
			j.e.Digest = d
		}
		return nil
	})
	for _, b := range need {
		if err = ctx.Err(); err != nil {
			break
		}
		if base.WSRacy(b) {
			continue
		}
		f, oerr := openWorkspaceFile(ws, b.Path)
		if oerr != nil {
			continue // gone, replaced or unreadable: drift, judged by apply
		}
		pool.jobs <- hashJob{e: b, f: f}
	}
	if err = errors.Join(err, pool.wait()); err != nil {
		return err
	}
	for _, b := range need {
		if b.Digest != "" && b.WS != (tree.Stat{}) && !base.WSRacy(b) {
			cache.learn(sideBase, b.Path, b.WS, b.Digest)
		}
	}
	return nil
}

// sameWSTuple reports whether the open file f still has e's workspace tuple.
func sameWSTuple(f *os.File, e *tree.Entry) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	t := viewTuple(fi)
	return t.Ino == e.WS.Ino && devOf(fi) == e.WS.Dev && t.Size == e.WS.Size &&
		t.Mtime == e.WS.Mtime && t.Ctime == e.WS.Ctime
}

func openWorkspaceFile(ws *fsx.Root, rel string) (*os.File, error) {
	d, err := ws.OpenDir(tree.Parent(rel))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.OpenFile(tree.Base(rel))
}
