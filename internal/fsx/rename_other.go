//go:build unix && !linux && !darwin

package fsx

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// renameAt renames with renameat. This system has no atomic no-replace rename:
// renameNoReplace checks first, and another process can create the target
// between the check and the rename. renameExchange is unsupported.
func renameAt(olddir int, old string, newdir int, new string, mode renameMode) error {
	switch mode {
	case renameExchange:
		return fmt.Errorf("atomic exchange: %w", errors.ErrUnsupported)
	case renameNoReplace:
		if _, err := lstatAt(newdir, new); err == nil {
			return unix.EEXIST
		} else if err != unix.ENOENT {
			return err
		}
	}
	return ignoringEINTR(func() error { return unix.Renameat(olddir, old, newdir, new) })
}
