//go:build unix

package wtx

import (
	"io/fs"
	"path/filepath"
	"syscall"
)

// diskUsage sums the blocks allocated to everything beneath dir.
func diskUsage(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			n += int64(st.Blocks) * 512
		} else {
			n += fi.Size()
		}
		return nil
	})
	return n
}
