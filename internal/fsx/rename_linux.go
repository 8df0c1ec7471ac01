package fsx

import "golang.org/x/sys/unix"

// renameAt renames with renameat2 and the flag that matches mode.
func renameAt(olddir int, old string, newdir int, new string, mode renameMode) error {
	var flags uint
	switch mode {
	case renameNoReplace:
		flags = unix.RENAME_NOREPLACE
	case renameExchange:
		flags = unix.RENAME_EXCHANGE
	}
	return ignoringEINTR(func() error { return unix.Renameat2(olddir, old, newdir, new, flags) })
}
