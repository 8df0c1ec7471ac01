package wtx

import (
	"os"
	"syscall"

	"github.com/wtx-dev/wtx/internal/state"
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

// identOf returns the device and inode of the directory at path (zero when
// they cannot be read: the record is then found by path alone).
func identOf(path string) state.Ident {
	fi, err := os.Stat(path)
	if err != nil {
		return state.Ident{}
	}
	ino, dev, _ := inodeOf(fi)
	return state.Ident{Dev: dev, Ino: ino}
}
