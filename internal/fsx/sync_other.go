//go:build unix && !darwin

package fsx

import (
	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/failpoint"
)

// fsync flushes fd to stable storage.
func fsync(fd int) error {
	if failpoint.Disabled("fsync") {
		return nil
	}
	if err := failpoint.Fault("fsync"); err != nil {
		return err
	}
	return ignoringEINTR(func() error { return unix.Fsync(fd) })
}
