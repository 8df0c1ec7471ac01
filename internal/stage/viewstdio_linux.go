package stage

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// disableConfineStdio leaves the command's standard descriptors as they
// were given (a negative control; builds with the wtxfailpoint tag only).
const disableConfineStdio = "confine-stdio"

// viewStdio gives the command, for each of its standard descriptors that
// holds a file or directory of the real workspace (a run whose input is
// redirected from a file in it: wtx run -- sort < data.txt), the same
// path in the view now bound over the workspace, opened the same way at
// the same offset. /proc/self/fd/N names the object a descriptor holds,
// whatever it was opened for: given the workspace's file to read, the
// command could open it again for writing there and change the real
// workspace on every backend, --read-only included (T-002). A file
// descriptor opened for writing is left as it is: the caller redirected
// the command's output into that file of the workspace and wants it
// written. A path the view does not show (excluded) refuses the run.
// Called in the command's mount namespace once the view is in place.
func viewStdio(s *nsSpec) error {
	if s.Workspace == "" || confineDisabled(s, disableConfineStdio) {
		return nil
	}
	for fd := 0; fd <= 2; fd++ {
		if err := viewDescriptor(s.Workspace, fd); err != nil {
			return err
		}
	}
	return nil
}

// viewDescriptor replaces descriptor fd as viewStdio says.
func viewDescriptor(ws string, fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil // not open: nothing to replace
	}
	typ := st.Mode & unix.S_IFMT
	if typ != unix.S_IFREG && typ != unix.S_IFDIR {
		return nil // a terminal, pipe or socket: not a path of the workspace
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return fmt.Errorf("standard descriptor %d: %w", fd, err)
	}
	if typ == unix.S_IFREG && flags&unix.O_ACCMODE != unix.O_RDONLY {
		return nil // output the caller sends into the workspace on purpose
	}
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil || !inTree(p, ws) {
		return nil // not reached through the workspace's path
	}
	nfd, err := reopenInView(p, flags&^(unix.O_CREAT|unix.O_TRUNC|unix.O_EXCL)|unix.O_NOFOLLOW|unix.O_CLOEXEC)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("standard descriptor %d is %s of the workspace, which the stage's view does not show", fd, p)
		}
		return fmt.Errorf("open %s in the view for standard descriptor %d: %w", p, fd, err)
	}
	defer unix.Close(nfd)
	var nst unix.Stat_t
	if err := unix.Fstat(nfd, &nst); err != nil {
		return fmt.Errorf("standard descriptor %d: %w", fd, err)
	}
	if nst.Dev == st.Dev && nst.Ino == st.Ino {
		return nil // the path shows the same object: no view over it
	}
	if off, err := unix.Seek(fd, 0, 1); err == nil && typ == unix.S_IFREG {
		if _, err := unix.Seek(nfd, off, 0); err != nil {
			return fmt.Errorf("standard descriptor %d: %w", fd, err)
		}
	}
	return unix.Dup3(nfd, fd, 0)
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
