//go:build wtxfailpoint && !linux

package failpoint

import (
	"errors"
	"fmt"
)

// Shutdown would shut down the filesystem holding dir; only Linux has the
// ioctl for it.
func Shutdown(dir string) error {
	return fmt.Errorf("shutdown %s: %w", dir, errors.ErrUnsupported)
}
