//go:build unix

package fsx

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Root is an open handle on a workspace root directory. Its methods are safe
// for concurrent use; Close must not race with them.
type Root struct {
	fd   int
	path string
	dev  uint64
	mnt  mountRef
}

// OpenRoot opens the workspace root at path, which must be absolute. The final
// component of path must be a directory, not a symlink to one; earlier
// components are resolved the ordinary way.
func OpenRoot(path string) (*Root, error) {
	if !filepath.IsAbs(path) {
		return nil, &fs.PathError{Op: "open root", Path: path, Err: fmt.Errorf("%w: not absolute", ErrInvalidPath)}
	}
	fd, err := openAt(unix.AT_FDCWD, path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		if st, serr := lstatAt(unix.AT_FDCWD, path); serr == nil {
			if m := fileMode(uint32(st.Mode)); m&fs.ModeSymlink != 0 {
				err = ErrSymlink
			} else if !m.IsDir() {
				err = ErrNotDir
			}
		}
		return nil, &fs.PathError{Op: "open root", Path: path, Err: err}
	}
	st, err := fstat(fd)
	if err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	return &Root{fd: fd, path: path, dev: uint64(st.Dev), mnt: mountOf(fd)}, nil
}

// Close closes the root handle. Directories opened from it stay open.
func (r *Root) Close() error {
	if r.fd < 0 {
		return &fs.PathError{Op: "close", Path: r.path, Err: os.ErrClosed}
	}
	err := unix.Close(r.fd)
	r.fd = -1
	if err != nil {
		return &fs.PathError{Op: "close", Path: r.path, Err: err}
	}
	return nil
}

// Path returns the path the root was opened with.
func (r *Root) Path() string { return r.path }

// Dev returns the st_dev of the root directory.
func (r *Root) Dev() uint64 { return r.dev }

// OpenDir opens directory rel beneath the root; rel must pass [ValidRel], and
// "." opens the root itself. A symlink component fails with an error wrapping
// [ErrSymlink], a mount point with [ErrCrossDevice], a component that is not a
// directory with [ErrNotDir] and a missing one with fs.ErrNotExist.
func (r *Root) OpenDir(rel string) (*Dir, error) {
	if err := ValidRel(rel); err != nil {
		return nil, &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	fd, err := resolveDir(r.fd, rel, r.dev, r.mnt)
	if err != nil {
		return nil, err
	}
	return &Dir{fd: fd, rel: rel, dev: r.dev, mnt: r.mnt}, nil
}

// Lstat describes rel beneath the root without following a symlink at rel. Its
// parent directory is resolved as by [Root.OpenDir].
func (r *Root) Lstat(rel string) (Stat, error) {
	if err := ValidRel(rel); err != nil {
		return Stat{}, &fs.PathError{Op: "lstat", Path: rel, Err: err}
	}
	if rel == "." {
		st, err := fstat(r.fd)
		if err != nil {
			return Stat{}, &fs.PathError{Op: "fstat", Path: rel, Err: err}
		}
		return statOf(&st), nil
	}
	if path.Dir(rel) == "." {
		// Directly under the root: no directory to resolve.
		st, err := lstatAt(r.fd, rel)
		if err != nil {
			return Stat{}, &fs.PathError{Op: "lstat", Path: rel, Err: err}
		}
		return statOf(&st), nil
	}
	d, err := r.OpenDir(path.Dir(rel))
	if err != nil {
		return Stat{}, err
	}
	defer d.Close()
	return d.Lstat(path.Base(rel))
}

// mountRef identifies a mount where the system reports mount ids.
type mountRef struct {
	id uint64
	ok bool // id is known
}

// walkDir opens rel beneath the directory start one component at a time with
// openat(O_DIRECTORY|O_NOFOLLOW), checking after each step that the directory
// is on device dev (and mount mnt, where known). base is the rel path of start,
// used in errors.
func walkDir(start int, base, rel string, dev uint64, mnt mountRef) (int, error) {
	if rel == "." {
		fd, err := openAt(start, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return -1, &fs.PathError{Op: "openat", Path: base, Err: err}
		}
		return fd, nil
	}
	cur, curRel := start, base
	for comp := range strings.SplitSeq(rel, "/") {
		next, err := openDirAt(cur, curRel, comp, dev, mnt)
		if cur != start {
			unix.Close(cur)
		}
		if err != nil {
			return -1, err
		}
		cur, curRel = next, joinRel(curRel, comp)
	}
	return cur, nil
}

// openDirAt opens the directory name inside dirfd (whose rel path is dirRel)
// without following a symlink and checks that it is on the same mount.
func openDirAt(dirfd int, dirRel, name string, dev uint64, mnt mountRef) (int, error) {
	rel := joinRel(dirRel, name)
	fd, err := openAt(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|noFollow(), 0)
	if err != nil {
		return -1, &fs.PathError{Op: "openat", Path: rel, Err: classifyDir(dirfd, name, err)}
	}
	if follow {
		return fd, nil // negative control: no mount check either
	}
	if err := checkMount(fd, rel, dev, mnt); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// classifyDir turns a failed directory open of name in dirfd into ErrSymlink
// or ErrNotDir when the entry is a symlink or not a directory. Systems differ in the errno they
// return for O_NOFOLLOW on a symlink (ELOOP, EMLINK, EFTYPE), so the entry is
// examined instead.
func classifyDir(dirfd int, name string, err error) error {
	if err == unix.ENOENT || err == unix.EACCES || err == unix.EMFILE || err == unix.ENFILE {
		return err
	}
	st, serr := lstatAt(dirfd, name)
	if serr != nil {
		return err
	}
	switch m := fileMode(uint32(st.Mode)); {
	case m&fs.ModeSymlink != 0:
		return ErrSymlink
	case !m.IsDir():
		return ErrNotDir
	}
	return err
}

// checkMount verifies that the directory open at fd is on device dev and, when
// the mount id is known, on mount mnt.
func checkMount(fd int, rel string, dev uint64, mnt mountRef) error {
	got, m, err := devAndMount(fd, mnt.ok)
	if err != nil {
		return &fs.PathError{Op: "fstat", Path: rel, Err: err}
	}
	if got != dev {
		return &fs.PathError{Op: "open", Path: rel, Err: ErrCrossDevice}
	}
	if mnt.ok && m.ok && m.id != mnt.id {
		return &fs.PathError{Op: "open", Path: rel, Err: ErrCrossDevice}
	}
	return nil
}

// DirCache keeps the directories opened beneath a root for the length of
// one pass over many names, so that each is resolved once, not once per
// name. A directory renamed or replaced while the cache holds it is still
// the one the cache opened: a pass that must see such a change opens the
// directory afresh. Its methods are for one goroutine.
type DirCache struct {
	root *Root
	dirs map[string]*Dir
}

// NewDirCache returns an empty cache of directories beneath root.
func NewDirCache(root *Root) *DirCache {
	return &DirCache{root: root, dirs: map[string]*Dir{}}
}

// Open returns directory rel, opened as by [Root.OpenDir] the first time it
// is asked for. The cache owns it: the caller must not close it. Failures
// are not kept.
func (c *DirCache) Open(rel string) (*Dir, error) {
	if d, ok := c.dirs[rel]; ok {
		return d, nil
	}
	d, err := c.root.OpenDir(rel)
	if err != nil {
		return nil, err
	}
	c.dirs[rel] = d
	return d, nil
}

// Close closes every directory the cache holds.
func (c *DirCache) Close() {
	for rel, d := range c.dirs {
		_ = d.Close() // a directory opened read-only: nothing to lose
		delete(c.dirs, rel)
	}
}
