package stage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/tree"
)

// ErrUnsupported is wrapped by errors of backends or options that this
// platform or filesystem cannot provide.
var ErrUnsupported = errors.ErrUnsupported

// ErrConfinement is wrapped (with ErrUnsupported) by errors of run options
// that confine a command (RunOptions.ReadOnly, RunOptions.NoNetwork) where
// the backend or the system cannot give them.
var ErrConfinement = errors.New("confinement cannot be given")

// confinementError says which confinement cannot be given and why; it is
// both ErrConfinement and ErrUnsupported.
type confinementError struct{ msg string }

func (e *confinementError) Error() string { return e.msg }

func (e *confinementError) Is(target error) bool {
	return target == ErrConfinement || target == ErrUnsupported
}

func confinementErrorf(format string, args ...any) error {
	return &confinementError{msg: fmt.Sprintf(format, args...)}
}

// ErrUnfit is wrapped (with ErrUnsupported) by errors of a backend's Open
// that cannot stage this workspace's content faithfully, where another
// backend could: "auto" then takes the next one, saying why.
var ErrUnfit = errors.New("backend unfit for this workspace")

// unfitError is both ErrUnfit and ErrUnsupported.
type unfitError struct{ msg string }

func (e *unfitError) Error() string { return e.msg }

func (e *unfitError) Is(target error) bool { return target == ErrUnfit || target == ErrUnsupported }

// ErrLinkedSelector is wrapped by errors about a --share selector that
// names a symlink of the workspace, or a path through one: a shared path is
// bound into the view, and wtx never follows a link to find it.
var ErrLinkedSelector = errors.New("a shared path is or passes through a symlink")

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
	// SizeHint is about how many entries the workspace held when it was
	// last staged, or 0. A backend may size its buffers by it; a wrong
	// hint costs time or memory, never correctness.
	SizeHint int
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

// RunOptions confine a command run in a view. Backends that cannot provide
// an option refuse it with an error wrapping ErrUnsupported.
type RunOptions struct {
	// ReadOnly makes the whole view read-only for the command.
	ReadOnly bool
	// NoNetwork gives the command a network namespace of its own, with
	// only the loopback interface up.
	NoNetwork bool
	// Hold is the stage's busy lock, an open file whose lock must last as
	// long as any process of the command's container: the supervisor keeps
	// it open until the container is empty. The command never receives it.
	Hold *os.File
	// Wait makes the supervisor wait for the processes the command leaves
	// running instead of stopping them.
	Wait bool
	// Grace is how long leftovers get between SIGTERM and SIGKILL
	// (0: DefaultGrace).
	Grace time.Duration
	// Confine asks for the confinement every backend gives where it can
	// (the view at the workspace's own path, the workspace's other mounts
	// and the state root read-only, in namespaces the command cannot
	// leave) and refuses the run with ErrConfinement where it cannot be
	// given, instead of running the command unconfined. ReadOnly and
	// NoNetwork imply it.
	Confine bool
}

// disableConfineRequired is the negative control's switch: a run that
// must be confined runs unconfined where confinement cannot be given.
const disableConfineRequired = "confine-required"

// mustConfine reports whether a run with o is refused rather than run
// unconfined.
func (o RunOptions) mustConfine() bool {
	return (o.Confine || o.ReadOnly || o.NoNetwork) && !failpoint.Disabled(disableConfineRequired)
}

// View is one staged tree.
type View interface {
	// Prepare makes cmd run inside the view: it sets cmd.Dir (relative to the
	// view's root when cmd.Dir is relative) and, for backends whose view only
	// exists inside a namespace, rewrites cmd to enter it first. cmd.Path
	// must already be resolved.
	Prepare(cmd *exec.Cmd, opts RunOptions) error
	// Scan lists the view's current entries, sorted by path. A file's
	// digest is taken from base when the stat tuple (or the backend's own
	// bookkeeping) proves it unchanged; such entries of a backend with lazy
	// base digests may carry no digest and are marked tree.Entry.Unchanged.
	// Every other file is hashed. Scan fills in base, in place, the digest
	// of each base file that the change set touches and whose digest was
	// unknown, when the workspace copy still has its recorded stat tuple;
	// otherwise that digest stays "" and the workspace copy counts as
	// drifted. Excluded paths are left out.
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
