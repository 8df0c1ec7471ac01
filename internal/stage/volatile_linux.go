package stage

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
)

// A stage's overlay is mounted "volatile": overlayfs then skips every sync
// of the upper file system, above all the one it makes when it is
// unmounted, which flushes the whole file system the stage lives on: with
// other programs' unwritten data on it, that took seconds for a command
// that wrote nothing. What the command wrote is made durable by the helper
// itself when the command has ended: one syncfs of the upper directory, and
// only when the command left anything there (settleVolatile).
//
// Overlayfs marks a volatile mount's work directory (work/incompat/volatile)
// and refuses to mount it again while the mark is there. The helper removes
// the mark once the upper directory is synced. A mark still there means a
// helper ended before it synced: killed with its wtx, or the machine
// stopped. The boot id written before the mount tells them apart: within
// the same boot the upper directory lost nothing (the page cache has it),
// and it is synced and the mark removed; after a restart what the command
// wrote may be incomplete, and the view is in doubt (ErrViewInDoubt):
// nothing of it is read, mounted or applied, and the stage can only be
// dropped. WTX_DISABLE=volatile (failpoint build) mounts without it.

const (
	viewBootName  = "view-boot"
	volatileMarks = "work/incompat/volatile" // beneath the overlay's work directory
)

// volatileMark is the mark overlayfs leaves in the stage's work directory.
func volatileMark(work string) string { return filepath.Join(work, volatileMarks) }

// InDoubt reports whether the view of the stage in dir is in doubt (an
// error wrapping ErrViewInDoubt): an overlay view whose command was
// writing when the system stopped.
func InDoubt(dir string) error { return inDoubt(dir, filepath.Join(dir, workName)) }

// inDoubt reports whether the view of the stage in dir is in doubt: its
// volatile mark is there and the boot it was made in is over.
func inDoubt(dir, work string) error {
	if failpoint.Disabled("view-in-doubt") {
		return nil // the negative control of the in-doubt tests
	}
	if _, err := os.Lstat(volatileMark(work)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	now := bootID()
	then, err := os.ReadFile(filepath.Join(dir, viewBootName))
	if now == "" || err != nil || string(bytes.TrimSpace(then)) != now {
		return ErrViewInDoubt
	}
	return nil
}

// prepareVolatile readies a volatile mount: a mark left in this boot is
// settled (the upper directory synced, the mark removed), one left before
// a restart is refused, and the boot id is made durable beside the view
// before the mount can make anything unsynced. It reports whether to mount
// volatile.
func prepareVolatile(dir, work, upper string) (bool, error) {
	if failpoint.Disabled("volatile") {
		return false, nil
	}
	if err := inDoubt(dir, work); err != nil {
		return false, err
	}
	if _, err := os.Lstat(volatileMark(work)); err == nil {
		if err := settleVolatile(work, upper); err != nil {
			return false, err
		}
	}
	now := bootID()
	if now == "" {
		return false, nil // no boot id: a mount that syncs as before
	}
	file := filepath.Join(dir, viewBootName)
	if old, err := os.ReadFile(file); err != nil || string(bytes.TrimSpace(old)) != now {
		if err := fsx.WriteFileAtomic(file, []byte(now+"\n"), 0o600); err != nil {
			return false, fmt.Errorf("record the boot id: %w", err)
		}
	}
	return true, nil
}

// settleVolatile makes what the upper directory holds durable and removes
// the volatile mark, by paths (before a mount).
func settleVolatile(work, upper string) error {
	fd, err := unix.Open(upper, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the upper directory: %w", err)
	}
	defer unix.Close(fd)
	marks, err := openMarkDir(work)
	if err != nil {
		return err
	}
	defer unix.Close(marks)
	return settleVolatileAt(fd, marks)
}

// openMarkDir opens the directory of the overlay's volatile mark. The
// helper opens it right after its mount: once the state root is made
// read-only in its namespace (hideState), the mark can only be removed
// through a handle opened before.
func openMarkDir(work string) (int, error) {
	fd, err := unix.Open(filepath.Dir(volatileMark(work)), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open the view's volatile mark: %w", err)
	}
	return fd, nil
}

// openMarks gives the directories overlayfs made with no permission bits
// (its work directory, and the mark's directories beneath it, the
// directory of which is open at marks) to their owner: wtx outside the
// helper's namespace then looks for the mark (inDoubt), and whoever
// removes the stage directory as an ordinary user can read them. Where it
// fails the mark is only harder to see, and the view is held in doubt
// after a restart.
func openMarks(work string, marks int) {
	if fd, err := unix.Open(filepath.Dir(filepath.Dir(volatileMark(work))), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
		_ = unix.Fchmod(fd, 0o700) // see above
		unix.Close(fd)
	}
	_ = unix.Fchmod(marks, 0o700) // see above
	if fd, err := unix.Openat(marks, filepath.Base(volatileMarks), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
		_ = unix.Fchmod(fd, 0o700) // see above
		unix.Close(fd)
	}
}

// settleVolatileAt syncs the upper directory open at upper when it holds
// anything, then removes the mark beneath the directory open at marks.
func settleVolatileAt(upper, marks int) error {
	empty, err := emptyDir(upper)
	if err != nil {
		return fmt.Errorf("read the upper directory: %w", err)
	}
	if !empty {
		if err := unix.Syncfs(upper); err != nil {
			return fmt.Errorf("sync the view: %w", err)
		}
	}
	if err := removeMark(marks); err != nil {
		return fmt.Errorf("remove the view's volatile mark: %w", err)
	}
	return nil
}

// removeMark removes the mark directory (and the files overlayfs keeps in
// it) beneath the directory open at marks.
func removeMark(marks int) error {
	name := filepath.Base(volatileMarks)
	names, err := namesAt(marks, name, -1)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, child := range names {
		if err := unix.Unlinkat(marks, name+"/"+child, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
	}
	if err := unix.Unlinkat(marks, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return nil
}

// emptyDir reports whether the directory open at fd has no entries.
func emptyDir(fd int) (bool, error) {
	names, err := namesAt(fd, ".", 1)
	return len(names) == 0, err
}

// namesAt reads up to max (all when negative) names of the directory name
// beneath dirfd, through a handle of its own.
func namesAt(dirfd int, name string, max int) ([]string, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var names []string
	buf := make([]byte, 4096)
	for max < 0 || len(names) < max {
		n, err := unix.ReadDirent(fd, buf)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			break
		}
		_, _, names = unix.ParseDirent(buf[:n], max-len(names), names)
	}
	return names, nil
}
