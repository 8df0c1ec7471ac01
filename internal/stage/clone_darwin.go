package stage

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// cloneInto makes dst, a new file, a clone of src with clonefile(2) and
// returns it open.
func cloneInto(src *os.File, dst string) (*os.File, error) {
	if err := unix.Fclonefileat(int(src.Fd()), unix.AT_FDCWD, dst, unix.CLONE_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EXDEV) {
			return nil, fmt.Errorf("clone %s: %w: %w", dst, err, ErrUnsupported)
		}
		return nil, fmt.Errorf("clone %s: %w", dst, err)
	}
	return os.OpenFile(dst, os.O_RDONLY, 0)
}

// fsName names the filesystem type of path, for messages.
func fsName(path string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return "the filesystem of " + path
	}
	return unix.ByteSliceToString(st.Fstypename[:]) + " (" + path + ")"
}
