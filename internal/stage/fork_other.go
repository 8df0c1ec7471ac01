//go:build !linux

package stage

import (
	"fmt"

	"github.com/wtx-dev/wtx/internal/fsx"
)

// forkSpecial refuses special files: only an overlay stage (Linux) holds
// any.
func forkSpecial(s, d *fsx.Dir, name string, st fsx.Stat) error {
	return fmt.Errorf("%s/%s: %w", s.Rel(), name, ErrSpecial)
}

// copyXattrsFd has nothing to copy: the overlay's attributes exist on Linux
// alone.
func copyXattrsFd(src, dst int) error { return nil }
