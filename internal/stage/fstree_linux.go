package stage

import (
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// FilesystemTree returns the filesystem dir lies on (its device as
// /proc/self/mountinfo writes it, major:minor) and dir's path within that
// filesystem. The same directory gives the same pair through whatever
// mount it is reached by (a bind mount of it or of a directory above or
// below it), so two trees that share a device overlap exactly when one
// path lies within the other. dir must be absolute and clean; when it does
// not exist yet, its nearest existing directory above is looked up and the
// rest appended. No symlink is followed on the way.
func FilesystemTree(dir string) (dev, path string, err error) {
	mounts, err := readMounts()
	if err != nil {
		return "", "", fmt.Errorf("read the mount table: %w", err)
	}
	return treeIn(mounts, dir)
}

// treeIn is FilesystemTree with the mount table read.
func treeIn(mounts []mountEntry, dir string) (dev, path string, err error) {
	rest := ""
	for {
		fd, err := openNoFollow(dir)
		if err == nil {
			defer unix.Close(fd)
			home, ok := homeMount(mounts, fd, dir)
			if !ok {
				return "", "", fmt.Errorf("%s: no mount holds it", dir)
			}
			rel, err := filepath.Rel(home.point, dir)
			if err != nil {
				return "", "", fmt.Errorf("%s: %w", dir, err)
			}
			return home.dev, filepath.Join(home.root, rel, rest), nil
		}
		parent := filepath.Dir(dir)
		if !errors.Is(err, unix.ENOENT) || parent == dir {
			return "", "", fmt.Errorf("%s: %w", dir, err)
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
}
