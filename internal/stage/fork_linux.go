package stage

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/fsx"
)

// forkSpecial copies the overlay whiteout name of s (a character device
// 0/0) into d; any other special file is refused.
func forkSpecial(s, d *fsx.Dir, name string, st fsx.Stat) error {
	var ust unix.Stat_t
	if err := unix.Fstatat(s.Fd(), name, &ust, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if ust.Mode&unix.S_IFMT != unix.S_IFCHR || ust.Rdev != 0 {
		return fmt.Errorf("%s: %w", joinName(s.Rel(), name), ErrSpecial)
	}
	return unix.Mknodat(d.Fd(), name, unix.S_IFCHR|0o600, 0)
}

// copyXattrsFd copies the overlay's own extended attributes (user.overlay.*
// and trusted.overlay.*) of the object open at src to the one open at dst.
func copyXattrsFd(src, dst int) error {
	buf := make([]byte, 4096)
	n, err := unix.Flistxattr(src, buf)
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
		m, err := unix.Fgetxattr(src, name, val)
		if err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
		if err := unix.Fsetxattr(dst, name, val[:m], 0); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

// joinName joins a rel directory path and a name, for messages.
func joinName(rel, name string) string {
	if rel == "." {
		return name
	}
	return rel + "/" + name
}
