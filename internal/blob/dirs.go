package blob

import (
	"errors"
	"io/fs"
	"sync/atomic"

	"github.com/wtx-dev/wtx/internal/fsx"
)

// The store's directories are opened once and their handles kept: an
// object is then reached with one call beneath its prefix directory,
// never by its path. A handle keeps naming the directory it opened; one
// whose directory was removed (by a person, or a test) is replaced by the
// directory now there, made again where a write needs it.

// subdir returns the directory name in parent. When it is missing and
// create is set it is made (0700) and parent synced, so that its entry is
// durable before anything is stored in it.
func subdir(parent *fsx.Dir, name string, create bool) (*fsx.Dir, error) {
	d, err := parent.OpenDir(name)
	if !create || !errors.Is(err, fs.ErrNotExist) {
		return d, err
	}
	if err := parent.Mkdir(name, dirPerm); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	if err := syncDir(parent); err != nil {
		return nil, err
	}
	return parent.OpenDir(name)
}

// gone reports whether the directory d was removed since it was opened.
func gone(d *fsx.Dir) bool {
	st, err := d.Stat()
	return err == nil && st.Nlink == 0
}

// top replaces old, the handle p held of the store directory's
// subdirectory name, which was found removed, by the directory now there,
// made again if missing. Another caller may have replaced it already.
func (s *Store) top(p *atomic.Pointer[fsx.Dir], name string, old *fsx.Dir) (*fsx.Dir, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.topLocked(p, name, old, true)
}

func (s *Store) topLocked(p *atomic.Pointer[fsx.Dir], name string, old *fsx.Dir, create bool) (*fsx.Dir, error) {
	if cur := p.Load(); cur != old {
		return cur, nil
	}
	d, err := subdir(s.root, name, create)
	if err != nil {
		return nil, err
	}
	p.Store(d)
	s.stale = append(s.stale, old)
	return d, nil
}

// prefixIndex is the number the first two hex digits of h spell.
func prefixIndex(h string) int {
	return hexVal(h[0])<<4 | hexVal(h[1])
}

func hexVal(c byte) int {
	if c >= 'a' {
		return int(c-'a') + 10
	}
	return int(c - '0')
}

// prefix returns the directory of the objects whose hex digits start with
// h[:2], opened when first asked for; with create it is made if missing.
func (s *Store) prefix(h string, create bool) (*fsx.Dir, error) {
	if d := s.prefixes[prefixIndex(h)].Load(); d != nil {
		return d, nil
	}
	return s.reprefix(h, nil, create)
}

// reprefix opens the prefix directory of h in place of old (nil when none
// was open yet). The objects directory too is opened again if it was
// removed.
func (s *Store) reprefix(h string, old *fsx.Dir, create bool) (*fsx.Dir, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	slot := &s.prefixes[prefixIndex(h)]
	if d := slot.Load(); d != old {
		return d, nil
	}
	objs := s.objects.Load()
	d, err := subdir(objs, h[:2], create)
	if errors.Is(err, fs.ErrNotExist) && gone(objs) {
		if objs, err = s.topLocked(&s.objects, objectsDir, objs, create); err == nil {
			d, err = subdir(objs, h[:2], create)
		}
	}
	if err != nil {
		return nil, s.damaged(err)
	}
	slot.Store(d)
	if old != nil {
		s.stale = append(s.stale, old)
	}
	return d, nil
}

// inPrefix runs fn on the prefix directory of h and the object's name in
// it (the prefix directory made first when create is set). Should fn find
// nothing there because the directory was removed since it was opened, fn
// runs once more on the directory now there.
func (s *Store) inPrefix(h string, create bool, fn func(d *fsx.Dir, name string) error) error {
	d, err := s.prefix(h, create)
	if err != nil {
		return err
	}
	err = fn(d, h[2:])
	if !errors.Is(err, fs.ErrNotExist) || !gone(d) {
		return s.damaged(err)
	}
	if d, err = s.reprefix(h, d, create); err != nil {
		return err
	}
	return s.damaged(fn(d, h[2:]))
}
