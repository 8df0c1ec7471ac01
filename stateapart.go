package wtx

import (
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/stage"
)

// treeWithin reports whether directory p lies within directory dir on
// their filesystem, whatever mounts each is reached through: a state root
// that is a bind mount of a directory in the workspace (or the workspace
// one of a directory in the state root) shows nothing of it by path, and
// the checks by path and by the identity of the directories above p miss
// it, since the parent of a mount's root is its mount point's. Each is
// located by the mount it is on (/proc/self/mountinfo: device and the path
// within the filesystem that the mount shows). false where that cannot be
// told (no mountinfo, another system).
//
// WTX_DISABLE=state-apart-mounts (failpoint build) leaves the check by
// mounts out: the negative control of its test.
func treeWithin(p, dir string) bool {
	if failpoint.Disabled("state-apart-mounts") {
		return false
	}
	pdev, ppath, err := stage.FilesystemTree(p)
	if err != nil {
		return false // no mount table here: the checks by path still hold
	}
	ddev, dpath, err := stage.FilesystemTree(dir)
	if err != nil {
		return false // as above
	}
	return pdev == ddev && within(ppath, dpath)
}
