//go:build unix && !darwin

package fsx

import "golang.org/x/sys/unix"

// fsync flushes fd to stable storage.
func fsync(fd int) error {
	return ignoringEINTR(func() error { return unix.Fsync(fd) })
}
