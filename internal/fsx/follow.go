package fsx

import (
	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/failpoint"
)

// follow switches the package's discipline off for a negative control:
// with WTX_DISABLE=nofollow (failpoint builds only) directories and files
// are resolved the ordinary way, following symlinks and crossing mount
// points, so that a test can show what a planted link does to wtx without
// the discipline. An ordinary build never sets it.
var follow = failpoint.Disabled("nofollow")

// noFollow is O_NOFOLLOW, or nothing under the negative control.
func noFollow() int {
	if follow {
		return 0
	}
	return unix.O_NOFOLLOW
}
