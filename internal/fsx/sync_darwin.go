package fsx

import "golang.org/x/sys/unix"

// fsync flushes fd to stable storage. Plain fsync on darwin only reaches the
// drive cache, so F_FULLFSYNC is used, with fsync as the fallback for file
// systems that do not support it.
func fsync(fd int) error {
	err := ignoringEINTR(func() error {
		_, err := unix.FcntlInt(uintptr(fd), unix.F_FULLFSYNC, 0)
		return err
	})
	if err == nil {
		return nil
	}
	return ignoringEINTR(func() error { return unix.Fsync(fd) })
}
