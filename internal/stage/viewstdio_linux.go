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

// disableConfineStdio leaves the command's standard descriptors as they
// were given (a negative control; builds with the wtxfailpoint tag only).
const disableConfineStdio = "confine-stdio"

// A standard descriptor of the command can hold a file or directory of
// the real workspace: a run whose input is redirected from a file in it
// (wtx run -- sort < data.txt). /proc/self/fd/N names the object a
// descriptor holds, whatever it was opened for, so a command given the
// workspace's file to read could open it again for writing and change the
// real workspace on every backend, --read-only included (T-002). So each
// such descriptor is replaced by the same path opened in the view, the
// same way and at the same offset: stdioInWorkspace finds them before the
// view is bound (by the path of the file within its filesystem, so a file
// reached through another mount of the workspace is found too), viewStdio
// replaces them once it is. A file descriptor opened for writing is left
// as it is: the caller redirected the command's output into that file of
// the workspace and wants it written. A path the view does not show
// (excluded) refuses the run.

// stdioFile is a standard descriptor that holds rel, a path of the
// workspace.
type stdioFile struct {
	fd    int
	rel   string
	flags int
	st    unix.Stat_t
}

// stdioInWorkspace returns the standard descriptors of this process that
// hold a file (opened for reading only) or a directory of the workspace.
// Called in the command's mount namespace before anything is bound there.
func stdioInWorkspace(s *nsSpec) ([]stdioFile, error) {
	if s.Workspace == "" || confineDisabled(s, disableConfineStdio) {
		return nil, nil
	}
	mounts, err := readMounts()
	if err != nil {
		return nil, fmt.Errorf("read the mount table: %w", err)
	}
	wsDev, wsTree, err := treeIn(mounts, s.Workspace)
	if err != nil {
		return nil, fmt.Errorf("locate the workspace: %w", err)
	}
	var out []stdioFile
	for fd := 0; fd <= 2; fd++ {
		f, ok := stdioFileOf(mounts, fd, wsDev, wsTree)
		if ok {
			out = append(out, f)
		}
	}
	return out, nil
}

// stdioFileOf says whether descriptor fd holds a file or directory of the
// workspace (the tree wsTree of filesystem wsDev) that viewStdio replaces.
func stdioFileOf(mounts []mountEntry, fd int, wsDev, wsTree string) (stdioFile, bool) {
	f := stdioFile{fd: fd}
	if err := unix.Fstat(fd, &f.st); err != nil {
		return f, false // not open
	}
	typ := f.st.Mode & unix.S_IFMT
	if typ != unix.S_IFREG && typ != unix.S_IFDIR {
		return f, false // a terminal, pipe or socket: no path of the workspace
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil || typ == unix.S_IFREG && flags&unix.O_ACCMODE != unix.O_RDONLY {
		return f, false // output the caller sends into that file on purpose
	}
	f.flags = flags &^ (unix.O_CREAT | unix.O_TRUNC | unix.O_EXCL)
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil || !filepath.IsAbs(p) {
		return f, false // no path names it (deleted, anonymous)
	}
	pfd, err := openNoFollow(p)
	if err != nil {
		return f, false // its path is gone or goes through a link: not reached through it
	}
	var pst unix.Stat_t
	err = unix.Fstat(pfd, &pst)
	unix.Close(pfd)
	if err != nil || pst.Dev != f.st.Dev || pst.Ino != f.st.Ino {
		return f, false // the path names something else now
	}
	dev, tree, err := treeIn(mounts, p)
	if err != nil || dev != wsDev || !inTree(tree, wsTree) {
		return f, false // not in the workspace's tree
	}
	f.rel = strings.TrimPrefix(strings.TrimPrefix(tree, wsTree), "/")
	return f, true
}

// viewStdio replaces each of files by its path opened in the view, now
// bound over the workspace's own path.
func viewStdio(s *nsSpec, files []stdioFile) error {
	for _, f := range files {
		p := filepath.Join(s.Workspace, f.rel)
		nfd, err := reopenInView(p, f.flags|unix.O_NOFOLLOW|unix.O_CLOEXEC)
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("standard descriptor %d is %s of the workspace, which the stage's view does not show", f.fd, p)
			}
			return fmt.Errorf("open %s in the view for standard descriptor %d: %w", p, f.fd, err)
		}
		err = replaceStdio(f, nfd)
		unix.Close(nfd)
		if err != nil {
			return fmt.Errorf("standard descriptor %d: %w", f.fd, err)
		}
	}
	return nil
}

// replaceStdio puts nfd, the view's file, in f's place at f's offset,
// unless it is the very object f holds (no view over it).
func replaceStdio(f stdioFile, nfd int) error {
	var nst unix.Stat_t
	if err := unix.Fstat(nfd, &nst); err != nil {
		return err
	}
	if nst.Dev == f.st.Dev && nst.Ino == f.st.Ino {
		return nil
	}
	if f.st.Mode&unix.S_IFMT == unix.S_IFREG {
		if off, err := unix.Seek(f.fd, 0, 1); err == nil {
			if _, err := unix.Seek(nfd, off, 0); err != nil {
				return err
			}
		}
	}
	return unix.Dup3(nfd, f.fd, 0)
}

// reopenInView opens path (absolute) with flags, following no symlink on
// the way (openat2 RESOLVE_NO_SYMLINKS; before Linux 5.6, O_NOFOLLOW on the
// last component only, which flags hold).
func reopenInView(path string, flags int) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags), Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	for {
		fd, err := unix.Openat2(unix.AT_FDCWD, path, &how)
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN):
			continue
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.E2BIG):
			return unix.Open(path, flags, 0)
		}
		return -1, err
	}
}
