package stage

import (
	"golang.org/x/sys/unix"
)

// RootModer is a View that can tell the permission bits (0777) of its root
// directory: the bits the change set compares for every other path.
type RootModer interface {
	RootMode() (uint32, error)
}

// DirMode returns the permission bits (0777) of the directory at p.
func DirMode(p string) (uint32, error) {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return 0, err
	}
	return uint32(st.Mode) & 0o777, nil
}

// RootMode is the mode of the view's root directory.
func (v *copyView) RootMode() (uint32, error) { return DirMode(v.root) }
