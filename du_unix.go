//go:build unix

package wtx

import "github.com/wtx-dev/wtx/internal/fsx"

// diskUsage sums the blocks allocated to everything beneath rel of the
// state root root, never following a symlink nor crossing a mount point.
func diskUsage(root *fsx.Root, rel string) int64 {
	return root.DiskUsage(rel)
}
