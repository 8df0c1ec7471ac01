//go:build !linux

package stage

import "errors"

// FilesystemTree is Linux's (it reads /proc/self/mountinfo); elsewhere it
// says it cannot tell.
func FilesystemTree(dir string) (dev, path string, err error) {
	return "", "", errors.ErrUnsupported
}
