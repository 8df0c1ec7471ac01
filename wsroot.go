package wtx

import (
	"fmt"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/quote"
)

// openRoot opens the workspace's directory as the root beneath which
// every path operation on it resolves, and checks that it is the directory
// Open found (device and inode). Each opening walks the canonical path
// again, and a directory on the way that another user may rename (a
// parent that user owns) can have been swapped for a symlink since Open:
// the operation would then act on another directory of the same name,
// outside the workspace, as the caller (T-001). Such a root is refused as
// refusal.boundary and nothing is done.
//
// WTX_DISABLE=workspace-ident (failpoint build) opens by path alone: the
// negative control of its test.
func (w *Workspace) openRoot() (*fsx.Root, error) {
	failpoint.Hit("workspace:open-root")
	root, err := fsx.OpenRoot(w.path)
	if err != nil {
		return nil, err
	}
	if w.ident.Ino == 0 || failpoint.Disabled("workspace-ident") {
		return root, nil // no identity was read at Open: nothing to compare
	}
	st, err := root.Lstat(".")
	if err != nil {
		_ = root.Close() // the stat's error is the one to report
		return nil, err
	}
	if st.Dev != w.ident.Dev || st.Ino != w.ident.Ino {
		_ = root.Close() // refused: nothing was done through it
		return nil, &Error{Code: CodeBoundary,
			Message: fmt.Sprintf("workspace %s is no longer the directory it was when wtx started (a directory on its path was replaced, perhaps by a symlink); nothing was done", quote.Path(w.path))}
	}
	return root, nil
}
