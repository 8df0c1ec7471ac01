package wtx

import (
	"os"
	"syscall"

	"github.com/wtx-dev/wtx/internal/tree"
)

func inodeOf(fi os.FileInfo) (ino, dev uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return uint64(st.Ino), uint64(st.Dev), true
}

// statOfView is the stat tuple of a staged file as the scan compares it.
func statOfView(fi os.FileInfo) tree.Stat {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return tree.Stat{}
	}
	return tree.Stat{Ino: uint64(st.Ino), Size: fi.Size(), Mtime: fi.ModTime().UnixNano(), Ctime: ctimeNs(st)}
}
