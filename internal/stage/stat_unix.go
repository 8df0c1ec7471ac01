//go:build unix

package stage

import (
	"io/fs"
	"syscall"

	"github.com/wtx-dev/wtx/internal/tree"
)

func ctimeOf(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return ctimespec(st)
	}
	return 0
}

func viewTuple(fi fs.FileInfo) tree.Stat {
	s := tree.Stat{Size: fi.Size(), Mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.Ino = uint64(st.Ino)
		s.Ctime = ctimespec(st)
	}
	return s
}

func devOf(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev)
	}
	return 0
}
