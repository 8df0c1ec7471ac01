package stage

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/tree"
)

// The helper finishes an overlay view by binding the shared paths into it
// and hiding the excluded ones, in trees that untrusted parties shape: the
// merged view shows the stage's upper directory, which holds whatever the
// stage's earlier commands left there (a directory replaced by a symlink
// to anywhere), and the workspace below it holds what a cloned repository
// ships (a "cache -> ." link). So every path is resolved beneath an open
// root (the merged view, the workspace, the stage's directory of hidden
// backings) without following a symlink or crossing a mount (fsx), acted
// on with single-component *at calls, and mounted by descriptor: a link is
// never followed, whoever made it.
//
//   - Hiding a file unlinks the entry itself in the directory that holds
//     it; a symlink there is removed as itself. A path the view reaches only
//     through a symlink, a mount or a non-directory shows nothing of the
//     workspace at that path: there is nothing to hide.
//   - Hiding a directory binds its empty backing over the entry when it is
//     a directory, and unlinks it as itself otherwise.
//   - Sharing binds the workspace's entry over the view's. In the workspace
//     a shared path that is or passes through a symlink is refused
//     (ErrLinkedSelector); Open and helperSpec refuse it first, with the
//     same error, and the helper checks again by descriptor. In the view,
//     a path the stage's commands replaced by a symlink, or put behind one,
//     is the view's own entry: it is not bound over, and not followed.
//
// WTX_DISABLE=view-links (failpoint build) resolves every path the
// ordinary way instead, following links: the negative control of the tests.

// disableViewLinks is the switch of the negative control (see above).
const disableViewLinks = "view-links"

// dirHandle is an open directory: an *fsx.Dir, or in the negative control
// a descriptor opened by path.
type dirHandle interface {
	Fd() int
	Close() error
}

// pathDir is a directory descriptor opened by path (negative control).
type pathDir int

func (d pathDir) Fd() int      { return int(d) }
func (d pathDir) Close() error { return unix.Close(int(d)) }

// viewTrees are the trees the helper finishes the view in, open.
type viewTrees struct {
	lower  *fsx.Root // the workspace
	merged *fsx.Root // the overlay's mount, not yet over the workspace
	hidden *fsx.Root // the stage's directory of hidden backings
}

func openViewTrees(s *nsSpec) (*viewTrees, error) {
	t := &viewTrees{}
	var err error
	if t.lower, err = fsx.OpenRoot(s.Lower); err != nil {
		return nil, fmt.Errorf("open the workspace: %w", err)
	}
	if t.merged, err = fsx.OpenRoot(s.Merged); err != nil {
		t.close()
		return nil, fmt.Errorf("open the view: %w", err)
	}
	if t.hidden, err = fsx.OpenRoot(s.Hidden); err != nil {
		t.close()
		return nil, fmt.Errorf("open the stage's excluded directory: %w", err)
	}
	return t, nil
}

func (t *viewTrees) close() {
	for _, r := range []*fsx.Root{t.lower, t.merged, t.hidden} {
		if r != nil {
			_ = r.Close() // opened to read and to mount on: nothing to lose
		}
	}
}

// finishView binds s's shared paths into the merged view and hides its
// excluded ones. Shares go first: a hidden path never reaches into a
// shared one, whose bind is a mount that resolution does not cross.
func finishView(s *nsSpec) error {
	t, err := openViewTrees(s)
	if err != nil {
		return err
	}
	defer t.close()
	// Under --read-only every mount beneath the view is bound read-only
	// (with confine-beneath off, none is: see readOnlyView).
	readOnly := s.ReadOnly && !confineDisabled(s, disableConfineBeneath)
	for _, rel := range s.Share {
		if err := t.share(rel, readOnly); err != nil {
			return err
		}
	}
	for _, rel := range s.HideFiles {
		if err := t.hideFile(rel); err != nil {
			return err
		}
	}
	for i, rel := range s.HideDirs {
		if err := t.hideDir(i, rel, readOnly); err != nil {
			return err
		}
	}
	return nil
}

// parent opens the directory that holds rel beneath root and returns it
// with rel's last name. It never follows a symlink or crosses a mount.
func parent(root *fsx.Root, rel string) (dirHandle, string, error) {
	if err := fsx.ValidRel(rel); err != nil || rel == "." {
		return nil, "", &fs.PathError{Op: "open", Path: rel, Err: fsx.ErrInvalidPath}
	}
	if failpoint.Disabled(disableViewLinks) {
		p := filepath.Join(root.Path(), filepath.FromSlash(tree.Parent(rel)))
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, "", &fs.PathError{Op: "open", Path: rel, Err: err}
		}
		return pathDir(fd), tree.Base(rel), nil
	}
	d, err := root.OpenDir(tree.Parent(rel))
	if err != nil {
		return nil, "", err
	}
	return d, tree.Base(rel), nil
}

// openEntry opens name in d as an O_PATH descriptor, never following a
// symlink at name, and describes what it opened.
func openEntry(d dirHandle, name string) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	flags := unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC
	if failpoint.Disabled(disableViewLinks) {
		flags &^= unix.O_NOFOLLOW
	}
	fd, err := unix.Openat(d.Fd(), name, flags, 0)
	if err != nil {
		return -1, st, err
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, st, err
	}
	return fd, st, nil
}

// unreachable reports whether err says that a path of the view cannot be
// reached as a directory without following a symlink or crossing a mount,
// or is not there: the view shows nothing of the workspace at it.
func unreachable(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, fsx.ErrSymlink) || errors.Is(err, fsx.ErrNotDir) ||
		errors.Is(err, fsx.ErrCrossDevice) || errors.Is(err, unix.ENOTDIR)
}

// hideFile removes the excluded entry rel from the view, as itself.
func (t *viewTrees) hideFile(rel string) error {
	d, name, err := parent(t.merged, rel)
	if unreachable(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("exclude %s: %w", rel, err)
	}
	defer d.Close()
	// A file that is now a directory is hidden as one (refreshHidden
	// lists it as one too); a mount there is a shared path, not hidden.
	err = unix.Unlinkat(d.Fd(), name, 0)
	if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("exclude %s: %w", rel, err)
	}
	return nil
}

// hideDir covers the excluded directory rel with its empty backing (the
// i-th), read-only when the view is; an entry there that is no longer a
// directory is removed from the view as itself.
func (t *viewTrees) hideDir(i int, rel string, readOnly bool) error {
	d, name, err := parent(t.merged, rel)
	if unreachable(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("exclude %s: %w", rel, err)
	}
	defer d.Close()
	fd, st, err := openEntry(d, name)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil:
		return fmt.Errorf("exclude %s: %w", rel, err)
	}
	defer unix.Close(fd)
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if err := unix.Unlinkat(d.Fd(), name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("exclude %s: %w", rel, err)
		}
		return nil
	}
	backing, err := t.backing(i)
	if err != nil {
		return fmt.Errorf("exclude %s: %w", rel, err)
	}
	defer backing.Close()
	if err := bindAt(backing.Fd(), d, name, fd, false, readOnly); err != nil {
		return fmt.Errorf("exclude %s: %w", rel, err)
	}
	return nil
}

// backing opens the i-th hidden directory's backing, made empty when
// missing.
func (t *viewTrees) backing(i int) (*fsx.Dir, error) {
	top, err := t.hidden.OpenDir(".")
	if err != nil {
		return nil, err
	}
	defer top.Close()
	name := hiddenBacking(i)
	if err := top.Mkdir(name, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	return top.OpenDir(name)
}

// share binds the workspace's entry rel over the view's, read-only when
// the view is.
func (t *viewTrees) share(rel string, readOnly bool) error {
	src, srcSt, err := t.lowerEntry(rel)
	if err != nil || src < 0 {
		return err
	}
	defer unix.Close(src)
	d, name, err := parent(t.merged, rel)
	if unreachable(err) {
		return nil // the view's own link, or nothing: not bound over, not followed
	}
	if err != nil {
		return fmt.Errorf("share %s: %w", rel, err)
	}
	defer d.Close()
	dst, dstSt, err := openEntry(d, name)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil // gone from the view
	case err != nil:
		return fmt.Errorf("share %s: %w", rel, err)
	}
	defer unix.Close(dst)
	switch kind := dstSt.Mode & unix.S_IFMT; {
	case kind == unix.S_IFLNK:
		return nil // as above
	case kind != srcSt.Mode&unix.S_IFMT:
		return fmt.Errorf("share %s: the view holds a %s where the workspace holds a %s", rel, kindName(kind), kindName(srcSt.Mode&unix.S_IFMT))
	}
	if err := bindAt(src, d, name, dst, true, readOnly); err != nil {
		return fmt.Errorf("share %s: %w", rel, err)
	}
	return nil
}

// lowerEntry opens the shared path rel of the workspace (-1 when it is
// gone), refusing a symlink at it or on the way to it.
func (t *viewTrees) lowerEntry(rel string) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	d, name, err := parent(t.lower, rel)
	switch {
	case errors.Is(err, fsx.ErrSymlink):
		return -1, st, linkedShareError(rel, err)
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fsx.ErrNotDir):
		return -1, st, nil // gone from the workspace
	case err != nil:
		return -1, st, fmt.Errorf("share %s: %w", rel, err)
	}
	defer d.Close()
	fd, st, err := openEntry(d, name)
	switch {
	case errors.Is(err, unix.ENOENT):
		return -1, st, nil
	case err != nil:
		return -1, st, fmt.Errorf("share %s: %w", rel, err)
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		unix.Close(fd)
		return -1, st, linkedShareError(rel, fsx.ErrSymlink)
	}
	return fd, st, nil
}

// linkedShareError is the refusal of a shared path rel that is or passes
// through a symlink.
func linkedShareError(rel string, err error) error {
	return fmt.Errorf("share %s: %w (%v); wtx does not follow it", rel, ErrLinkedSelector, err)
}

func kindName(mode uint32) string {
	switch mode {
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFREG:
		return "file"
	case unix.S_IFLNK:
		return "symlink"
	}
	return "special file"
}

// bindAt mounts the tree open at src (recursively when asked) over name in
// dir, which is open at dst, read-only when asked: by descriptor
// (open_tree, mount_setattr, move_mount), or where the kernel lacks those
// calls through /proc/self/fd. Nothing is resolved by path.
func bindAt(src int, dir dirHandle, name string, dst int, recursive, readOnly bool) error {
	flags := uint(unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC | unix.AT_EMPTY_PATH)
	if recursive {
		flags |= unix.AT_RECURSIVE
	}
	tfd, err := unix.OpenTree(src, "", flags)
	if errors.Is(err, unix.ENOSYS) {
		return bindByProc(src, dir, name, dst, recursive, readOnly)
	}
	if err != nil {
		return fmt.Errorf("open_tree: %w", err)
	}
	defer unix.Close(tfd)
	ro := false
	if readOnly {
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
		err := unix.MountSetattr(tfd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr)
		if err != nil && !errors.Is(err, unix.ENOSYS) {
			return fmt.Errorf("read-only: %w", err)
		}
		ro = err == nil
	}
	if err := unix.MoveMount(tfd, "", dst, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	if readOnly && !ro {
		return remountReadOnly(procFd(tfd)) // tfd is the new mount's root
	}
	return nil
}

// bindByProc is bindAt through the descriptors' /proc/self/fd entries,
// which name exactly the objects opened.
func bindByProc(src int, dir dirHandle, name string, dst int, recursive, readOnly bool) error {
	flags := uintptr(unix.MS_BIND)
	if recursive {
		flags |= unix.MS_REC
	}
	if err := unix.Mount(procFd(src), procFd(dst), "", flags, ""); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	if !readOnly {
		return nil
	}
	// The new mount's root, opened through the name it now covers.
	fd, err := unix.Openat(dir.Fd(), name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("read-only: %w", err)
	}
	defer unix.Close(fd)
	return remountReadOnly(procFd(fd))
}

func procFd(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }
