package wtx

import (
	"os"
	"syscall"
)

func inodeOf(fi os.FileInfo) (ino, dev uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return uint64(st.Ino), uint64(st.Dev), true
}
