package fsx

import "golang.org/x/sys/unix"

// renameAt renames with renameatx_np and the flag that matches mode.
func renameAt(olddir int, old string, newdir int, new string, mode renameMode) error {
	var flags uint32
	switch mode {
	case renameNoReplace:
		flags = unix.RENAME_EXCL
	case renameExchange:
		flags = unix.RENAME_SWAP
	}
	return ignoringEINTR(func() error { return unix.RenameatxNp(olddir, old, newdir, new, flags) })
}
