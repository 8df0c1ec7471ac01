//go:build wtxfailpoint && linux

package failpoint

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// goingDown is the filesystem shutdown ioctl, _IOR('X', 125, __u32): the
// same number for XFS_IOC_GOINGDOWN, EXT4_IOC_SHUTDOWN and FS_IOC_SHUTDOWN.
const goingDown = 0x8004587d

// noLogFlush is XFS_FSOP_GOING_FLAGS_NOLOGFLUSH (EXT4_GOING_FLAGS_NOLOGFLUSH):
// the filesystem stops at once and its log is not written out.
const noLogFlush = 2

// Shutdown shuts down the filesystem holding dir as a power cut would:
// every later call on it fails with EIO, and what was not yet durable is
// gone once it is mounted again.
func Shutdown(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("shutdown %s: %w", dir, err)
	}
	defer unix.Close(fd)
	if err := unix.IoctlSetPointerInt(fd, goingDown, noLogFlush); err != nil {
		return fmt.Errorf("shutdown %s: %w", dir, err)
	}
	return nil
}
