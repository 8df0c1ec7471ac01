package stage

import (
	"context"
	"errors"
	"os"
	"os/exec"

	"github.com/wtx-dev/wtx/internal/tree"
)

// ErrUnsupported is wrapped by errors of backends or options that this
// platform or filesystem cannot provide.
var ErrUnsupported = errors.ErrUnsupported

// OpenRequest is what a backend needs to stage a workspace.
type OpenRequest struct {
	// Workspace is the canonical absolute path of the workspace.
	Workspace string
	// Dir is a new, empty directory that belongs to the stage, on the state
	// root's filesystem. The backend keeps the view and its own files in it.
	Dir string
	// Exclude selects paths that are left out of the view and the manifest.
	Exclude tree.Selectors
	// Share selects paths the view sees untransacted (needs a binding backend).
	Share tree.Selectors
	// Progress, if set, is called now and then with the number of entries done.
	Progress func(done int)
}

// Backend makes views of a workspace.
type Backend interface {
	// Name is stable and recorded with the stage: "copy", "clone", "overlay".
	Name() string
	// Probe returns nil if the backend can stage workspace with its state in
	// stateDir, or an error wrapping ErrUnsupported saying why not.
	Probe(ctx context.Context, workspace, stateDir string) error
	// Open stages the workspace and returns the view and the base manifest.
	// On error nothing is left in req.Dir that Remove would not clean.
	Open(ctx context.Context, req OpenRequest) (View, *tree.Manifest, error)
	// Attach returns the view that an earlier Open made in dir.
	Attach(ctx context.Context, workspace, dir string) (View, error)
}

// View is one staged tree.
type View interface {
	// Prepare makes cmd run inside the view: it sets cmd.Dir (relative to the
	// view's root when cmd.Dir is relative) and, for backends whose view only
	// exists inside a namespace, rewrites cmd to enter it first.
	Prepare(cmd *exec.Cmd) error
	// Scan lists the view's current entries, sorted by path, with the digest
	// of every file (taken from base when the stat tuple proves the file
	// unchanged). Excluded paths are left out.
	Scan(ctx context.Context, base *tree.Manifest, exclude tree.Selectors) ([]tree.Entry, error)
	// OpenFile opens the staged regular file at rel for reading, never
	// following a symlink; anything else is refused.
	OpenFile(rel string) (*os.File, error)
	// Readlink reads the staged symlink at rel.
	Readlink(rel string) (string, error)
	// Root is a directory where the staged tree can be looked at, if the
	// backend has one outside a namespace ("" otherwise).
	Root() string
	// Close releases what the view holds open; the view stays on disk.
	Close() error
}

// Remover is implemented by views that keep more on disk than their stage
// directory, and need more than removing it.
type Remover interface {
	Remove(ctx context.Context) error
}
