package stage

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// cloneInto makes dst, a new file, a clone of src with FICLONE and returns
// it open.
func cloneInto(src *os.File, dst string) (*os.File, error) {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.IoctlFileClone(int(out.Fd()), int(src.Fd())); err != nil {
		out.Close()
		os.Remove(dst)
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EINVAL) {
			return nil, fmt.Errorf("clone %s: %w: %w", dst, err, ErrUnsupported)
		}
		return nil, fmt.Errorf("clone %s: %w", dst, err)
	}
	return out, nil
}

// fsName names the filesystem type of path, for messages.
func fsName(path string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return "the filesystem of " + path
	}
	names := map[int64]string{
		unix.EXT4_SUPER_MAGIC: "ext4", unix.TMPFS_MAGIC: "tmpfs", unix.XFS_SUPER_MAGIC: "xfs",
		unix.BTRFS_SUPER_MAGIC: "btrfs", unix.OVERLAYFS_SUPER_MAGIC: "overlayfs", unix.NFS_SUPER_MAGIC: "nfs",
		unix.FUSE_SUPER_MAGIC: "fuse",
	}
	if n, ok := names[int64(st.Type)]; ok {
		return n + " (" + path + ")"
	}
	return fmt.Sprintf("filesystem type %#x (%s)", st.Type, path)
}
