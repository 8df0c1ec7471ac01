package stage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Confinement of the workspace's tree, the same on every backend (T-002).
// A command run in a view must not write the real workspace by any path:
//
//   - its own absolute path shows the view (overlay: the merged view bound
//     there; copy and clone: the view's directory bound there, see
//     bindCopyView), so $PWD/… and $WTX_WORKSPACE/… land in the stage;
//   - every other mount of the workspace's directory tree (a bind mount of
//     it, or of a directory above or below it, found in
//     /proc/self/mountinfo by device and root) is read-only (coverAliases),
//     and so is every other mount of the state root's tree, which holds the
//     stage's own records;
//   - with --read-only, every mount at and beneath the workspace's path is
//     read-only: the view and what is bound into it (excluded directories'
//     backing, shared paths), not only its top (readOnlyView).
//
// All of it is done in the supervisor's mount namespace before the last
// step nests its own (confineAttr), which locks it.

// Protections a negative control may switch off (builds with the
// wtxfailpoint tag only).
const (
	disableConfineView    = "confine-view"    // copy, clone: the workspace's own path stays the real workspace
	disableConfineAlias   = "confine-alias"   // other mounts of the workspace and the state root stay writable
	disableConfineBeneath = "confine-beneath" // --read-only makes only the view's top mount read-only
	disableConfineOverlay = "confine-overlay" // an overlay whose upper directory is in the workspace stays writable
)

// mountEntry is one line of /proc/self/mountinfo: the mount's id, its
// device (major:minor), the path within its filesystem that is its root,
// and where it is mounted.
type mountEntry struct {
	id          int
	dev         string
	root, point string
	// upper is an overlay mount's upper directory, as it was given ("" for
	// any other mount).
	upper string
}

// readMounts reads this mount namespace's mount table.
func readMounts() ([]mountEntry, error) {
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	return parseMounts(string(raw)), nil
}

// parseMounts reads the lines of a mountinfo file.
func parseMounts(raw string) []mountEntry {
	var out []mountEntry
	for _, line := range strings.Split(raw, "\n") {
		// Fields are separated by one space; a path's own spaces, tabs,
		// newlines and backslashes are octal escapes, its other bytes
		// (U+00A0, invalid UTF-8) are as they are.
		f := strings.Split(line, " ")
		if len(f) < 5 {
			continue
		}
		id, err := strconv.Atoi(f[0])
		if err != nil {
			continue
		}
		out = append(out, mountEntry{id: id, dev: f[2], root: unescapeMountinfo(f[3]), point: unescapeMountinfo(f[4]), upper: overlayUpper(f)})
	}
	return out
}

// inTree reports whether path is dir or lies beneath it (both clean and
// absolute).
func inTree(path, dir string) bool {
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}

// openNoFollow opens path (absolute) as an O_PATH descriptor without
// following any symlink on the way (openat2 RESOLVE_NO_SYMLINKS; before
// Linux 5.6, O_NOFOLLOW on the last component only).
func openNoFollow(path string) (int, error) {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	for {
		fd, err := unix.Openat2(unix.AT_FDCWD, path, &how)
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN):
			continue
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.E2BIG):
			return unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		}
		return -1, err
	}
}

// mountIDOf is the id of the mount the object open at fd is on, or -1
// where the kernel does not say (before Linux 5.8).
func mountIDOf(fd int) int {
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &stx); err != nil || stx.Mask&unix.STATX_MNT_ID == 0 {
		return -1
	}
	return int(stx.Mnt_id)
}

// homeMount finds the mount that dir (open at fd) is reached through: by
// mount id, or else the last mount whose mount point is the longest
// prefix of dir.
func homeMount(mounts []mountEntry, fd int, dir string) (mountEntry, bool) {
	if id := mountIDOf(fd); id >= 0 {
		for _, m := range mounts {
			if m.id == id {
				return m, true
			}
		}
	}
	var best mountEntry
	found := false
	for _, m := range mounts {
		if inTree(dir, m.point) && (!found || len(m.point) >= len(best.point)) {
			best, found = m, true
		}
	}
	return best, found
}

// coverAliases makes every mount that shows part of the tree of one of
// dirs somewhere other than beneath that dir's own path read-only in this
// (private) mount namespace: a mount whose root lies in the tree is
// remounted read-only; a mount whose root lies above it gets a read-only
// bind of the tree over the place where the tree shows in it. A place
// another mount covers is left as it is (nothing reaches it by path); one
// this process may not open is left too (the command, with no more rights,
// cannot either).
//
// overlays says whether overlay mounts whose upper directory overlaps a
// tree are covered too (coverOverlayAliases).
func coverAliases(overlays bool, dirs ...string) error {
	mounts, err := readMounts()
	if err != nil {
		return fmt.Errorf("read the mount table: %w", err)
	}
	for i, dir := range dirs {
		if dir == "" {
			continue
		}
		if err := coverAliasesOf(mounts, dir, overlays, i == 0); err != nil {
			return err
		}
	}
	return nil
}

// coverAliasesOf covers the other mounts of dir's tree. workspace says dir
// is the workspace (the first of coverAliases' dirs): an overlay whose
// upper directory lies in it is another mount of it, whereas one whose
// upper directory lies in the state root is a stage's view.
func coverAliasesOf(mounts []mountEntry, dir string, overlays, workspace bool) error {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("cover other mounts of %s: %w", dir, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("cover other mounts of %s: %w", dir, err)
	}
	home, ok := homeMount(mounts, fd, dir)
	if !ok {
		return fmt.Errorf("cover other mounts of %s: no mount holds it", dir)
	}
	rel, err := filepath.Rel(home.point, dir)
	if err != nil {
		return fmt.Errorf("cover other mounts of %s: %w", dir, err)
	}
	tree := filepath.Join(home.root, rel) // dir, as a path of its filesystem
	if overlays {
		if err := coverOverlayAliases(mounts, home.dev, tree, workspace); err != nil {
			return fmt.Errorf("cover another mount of %s: %w", dir, err)
		}
	}
	for _, m := range mounts {
		if m.dev != home.dev {
			continue
		}
		switch {
		case inTree(m.root, tree):
			// A part of the tree mounted whole; beneath dir's own path
			// the view (or the state root's bind) covers it.
			if inTree(m.point, dir) {
				continue
			}
			err = readOnlyMountAt(m)
		case inTree(tree, m.root):
			r, _ := filepath.Rel(m.root, tree) // within: cannot fail
			alias := filepath.Join(m.point, r)
			if alias == dir {
				continue
			}
			err = readOnlyAlias(alias, &st)
		}
		if err != nil {
			return fmt.Errorf("cover another mount of %s: %w", dir, err)
		}
	}
	return nil
}

// skippable is an error opening a place that leaves nothing to cover:
// gone, not reached without a symlink, or not this process's to open.
func skippable(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) ||
		errors.Is(err, unix.EACCES) || errors.Is(err, unix.EXDEV)
}

// coverWorkspaceAliases covers the other mounts of the workspace and of
// the state root of s (see coverAliases), unless a negative control
// switched it off.
func coverWorkspaceAliases(s *nsSpec) error {
	if s.Workspace == "" || confineDisabled(s, disableConfineAlias) {
		return nil
	}
	state, _ := stateDirOf(s)
	return coverAliases(!confineDisabled(s, disableConfineOverlay), s.Workspace, state)
}

// readOnlyMountAt remounts m read-only, when m is what its mount point
// shows.
func readOnlyMountAt(m mountEntry) error {
	fd, err := openNoFollow(m.point)
	if err != nil {
		if skippable(err) {
			return nil
		}
		return fmt.Errorf("open %s: %w", m.point, err)
	}
	defer unix.Close(fd)
	if id := mountIDOf(fd); id >= 0 && id != m.id {
		return nil // covered by another mount
	}
	return readOnlyFD(fd, m.point)
}

// readOnlyAlias binds the directory at alias over itself, read-only, when
// it is the directory st describes.
func readOnlyAlias(alias string, st *unix.Stat_t) error {
	fd, err := openNoFollow(alias)
	if err != nil {
		if skippable(err) {
			return nil
		}
		return fmt.Errorf("open %s: %w", alias, err)
	}
	defer unix.Close(fd)
	var at unix.Stat_t
	if err := unix.Fstat(fd, &at); err != nil {
		return fmt.Errorf("stat %s: %w", alias, err)
	}
	if at.Dev != st.Dev || at.Ino != st.Ino {
		return nil // another mount covers the place: nothing of the tree shows there
	}
	self := "/proc/self/fd/" + strconv.Itoa(fd)
	if err := unix.Mount(self, self, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", alias, err)
	}
	top, err := openNoFollow(alias)
	if err != nil {
		return fmt.Errorf("open %s: %w", alias, err)
	}
	defer unix.Close(top)
	return readOnlyFD(top, alias)
}

// readOnlyFD makes the mount whose root is open at fd read-only.
func readOnlyFD(fd int, name string) error {
	err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
	if errors.Is(err, unix.ENOSYS) {
		err = remountReadOnly("/proc/self/fd/" + strconv.Itoa(fd))
	}
	if err != nil {
		return fmt.Errorf("read-only %s: %w", name, err)
	}
	return nil
}

// readOnlyView makes the view at the workspace's path read-only for a
// --read-only run: the mount there and every mount beneath it.
func readOnlyView(s *nsSpec) error {
	if confineDisabled(s, disableConfineBeneath) {
		if err := remountReadOnly(s.Workspace); err != nil {
			return err
		}
		for _, rel := range s.Share {
			if err := remountReadOnly(filepath.Join(s.Workspace, rel)); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
				return err
			}
		}
		return nil
	}
	err := unix.MountSetattr(-1, s.Workspace, unix.AT_RECURSIVE|unix.AT_SYMLINK_NOFOLLOW, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("read-only %s: %w", s.Workspace, err)
	}
	// Before mount_setattr (Linux 5.12): each mount by its path, the top
	// one first.
	if err := remountReadOnly(s.Workspace); err != nil {
		return err
	}
	mounts, err := readMounts()
	if err != nil {
		return fmt.Errorf("read-only %s: %w", s.Workspace, err)
	}
	for _, m := range mounts {
		if m.point == s.Workspace || !inTree(m.point, s.Workspace) {
			continue
		}
		if err := remountReadOnly(m.point); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
			return err
		}
	}
	return nil
}

// bindCopyView binds a copy or clone view (s.Keep) over the workspace's
// own path, as the overlay backend binds its merged view, and moves the
// command's directory there: what the command writes through the
// workspace's absolute path lands in the view. The view is opened without
// following a symlink, and bound through its descriptor.
func bindCopyView(s *nsSpec) error {
	view, err := openNoFollow(s.Keep)
	if err != nil {
		return fmt.Errorf("open the view %s: %w", s.Keep, err)
	}
	defer unix.Close(view)
	ws, err := openNoFollow(s.Workspace)
	if err != nil {
		return fmt.Errorf("open the workspace %s: %w", s.Workspace, err)
	}
	defer unix.Close(ws)
	src, dst := "/proc/self/fd/"+strconv.Itoa(view), "/proc/self/fd/"+strconv.Itoa(ws)
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("mount the view on %s: %w", s.Workspace, err)
	}
	if rel, err := filepath.Rel(s.Keep, s.Cwd); err == nil && filepath.IsLocal(rel) {
		s.Cwd = filepath.Join(s.Workspace, rel)
	}
	return nil
}
