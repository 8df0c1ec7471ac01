package stage

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"golang.org/x/sys/unix"
)

// forkSpecial copies an overlay whiteout (a character device 0/0); any
// other special file is refused.
func forkSpecial(src, dst string, fi fs.FileInfo) error {
	var st unix.Stat_t
	if err := unix.Lstat(src, &st); err != nil {
		return err
	}
	if fi.Mode()&fs.ModeCharDevice == 0 || st.Rdev != 0 {
		return fmt.Errorf("%s: %w", src, ErrSpecial)
	}
	return unix.Mknod(dst, unix.S_IFCHR|0o600, 0)
}

// copyXattrs copies the overlay's own extended attributes (user.overlay.*
// and trusted.overlay.*) of src to dst.
func copyXattrs(src, dst string) error {
	buf := make([]byte, 4096)
	n, err := unix.Llistxattr(src, buf)
	if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.ERANGE) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, name := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
		if !strings.HasPrefix(name, "user.overlay.") && !strings.HasPrefix(name, "trusted.overlay.") {
			continue
		}
		val := make([]byte, 4096)
		m, err := unix.Lgetxattr(src, name, val)
		if err != nil {
			return fmt.Errorf("read %s of %s: %w", name, src, err)
		}
		if err := unix.Lsetxattr(dst, name, val[:m], 0); err != nil {
			return fmt.Errorf("write %s of %s: %w", name, dst, err)
		}
	}
	return nil
}
