package stage

import (
	"errors"
	"io/fs"
	"sync"

	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/tree"
)

// RawOpener is implemented by views that can open a staged regular file
// as an [fsx.File], at the cost of the calls that find and open it: an
// apply reads every file it lands this way. ok is false when the view
// cannot say so cheaply (the file may still be there): the caller then
// uses View.OpenFile.
type RawOpener interface {
	OpenRaw(rel string) (f *fsx.File, ok bool, err error)
}

// rawOpener opens regular files beneath one directory as fsx.Files. It
// keeps that directory and the directory of the last file open, so a pass
// over the files of one directory resolves it once. It is safe for
// concurrent use (one open at a time).
type rawOpener struct {
	mu   sync.Mutex
	root *fsx.Root
	dir  *fsx.Dir
}

// open opens rel beneath the directory top: ok is false, with no error, when nothing but a regular
// file is there (absent, another type, a directory above it missing or not
// one). The entry is looked at before it is opened, so a device or a FIFO
// is never opened.
func (o *rawOpener) open(top, rel string) (*fsx.File, bool, error) {
	if err := fsx.ValidRel(rel); err != nil || rel == "." {
		return nil, false, nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.root != nil && o.root.Path() != top {
		_ = o.root.Close() // read-only: nothing to lose
		o.root = nil
	}
	if o.root == nil {
		if o.dir != nil {
			_ = o.dir.Close() // read-only: nothing to lose
			o.dir = nil
		}
		r, err := fsx.OpenRoot(top)
		if err != nil {
			return nil, false, err
		}
		o.root = r
	}
	parent := tree.Parent(rel)
	if o.dir == nil || o.dir.Rel() != parent {
		if o.dir != nil {
			_ = o.dir.Close() // read-only: nothing to lose
			o.dir = nil
		}
		d, err := o.root.OpenDir(parent)
		if err != nil {
			return nil, false, nil
		}
		o.dir = d
	}
	name := tree.Base(rel)
	st, err := o.dir.Lstat(name)
	if err != nil || !st.IsRegular() {
		return nil, false, nil
	}
	f, err := o.dir.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return f, true, nil
}

// close closes what the opener holds; it may be used again after.
func (o *rawOpener) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.dir != nil {
		_ = o.dir.Close() // read-only: nothing to lose
		o.dir = nil
	}
	if o.root != nil {
		_ = o.root.Close() // read-only: nothing to lose
		o.root = nil
	}
}
