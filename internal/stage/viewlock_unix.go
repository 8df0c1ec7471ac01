//go:build unix

package stage

import (
	"os"
	"os/exec"

	"golang.org/x/sys/unix"
)

// lockView takes an exclusive flock on a copy or clone view's root
// directory for as long as a command may write in it (an overlay view's
// upper directory is locked by its helper, lockUpper). A scan that finds
// the view locked keeps no digest of it (digestCache): a write through a
// shared memory mapping to a page already dirty moves neither mtime nor
// ctime, so a digest taken while a command runs could outlive the content
// it names. It returns nil where the lock cannot be taken.
func lockView(root string) *os.File {
	if root == "" {
		return nil
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), root)
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil
	}
	return f
}

// Start starts cmd (its Path resolved, its Dir relative to the view's
// root) in view v, contained as this system can (see start), with the
// view locked for as long as the command may write in it (lockView).
func Start(v View, cmd *exec.Cmd, opts RunOptions) (*Container, error) {
	lk := lockView(v.Root())
	c, err := start(v, cmd, opts)
	if err != nil {
		if lk != nil {
			lk.Close()
		}
		return nil, err
	}
	c.viewLock = lk
	return c, nil
}

// releaseView lets scans keep the view's digests again.
func (c *Container) releaseView() {
	if c.viewLock != nil {
		c.viewLock.Close()
		c.viewLock = nil
	}
}

// viewBusy reports whether a command may be writing in the view whose
// locked directory is dir (see lockView); where that cannot be told, it
// says so.
func viewBusy(dir string) bool {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return true
	}
	defer unix.Close(fd)
	if err := unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return true
	}
	_ = unix.Flock(fd, unix.LOCK_UN) // closing the descriptor releases it as well
	return false
}
