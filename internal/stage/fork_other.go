//go:build !linux

package stage

import (
	"fmt"
	"io/fs"
)

// forkSpecial refuses special files: only an overlay stage (Linux) holds
// any.
func forkSpecial(src, dst string, fi fs.FileInfo) error {
	return fmt.Errorf("%s: %w", src, ErrSpecial)
}

// copyXattrs has nothing to copy: the overlay's attributes exist on Linux
// alone.
func copyXattrs(src, dst string) error { return nil }
