//go:build unix

package stage

import (
	"os"

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
