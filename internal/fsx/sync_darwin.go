package fsx

import (
	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/failpoint"
)

// fsync flushes fd to stable storage. Plain fsync on darwin only reaches the
// drive cache, so F_FULLFSYNC is used, with fsync as the fallback for file
// systems that do not support it.
func fsync(fd int) error {
	if failpoint.Disabled("fsync") {
		return nil
	}
	if err := failpoint.Fault("fsync"); err != nil {
		return err
	}
	err := ignoringEINTR(func() error {
		_, err := unix.FcntlInt(uintptr(fd), unix.F_FULLFSYNC, 0)
		return err
	})
	if err == nil {
		return nil
	}
	return ignoringEINTR(func() error { return unix.Fsync(fd) })
}
