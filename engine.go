package wtx

import (
	"context"
	"fmt"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/engine"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/tree"
)

// This file joins the package to its write-ahead engine (internal/engine):
// the engine gets the workspace it writes, and what it reports becomes an
// *Error with the codes and repairs of errors.go.

// tempPrefix starts the name of every temporary file wtx makes in a
// workspace directory while it applies.
const tempPrefix = engine.TempPrefix

// engineStore is the workspace as the engine writes it, its tree open at
// root; write, if set, hears of the steps of an op (see writeProgress).
func (w *Workspace) engineStore(root *fsx.Root, write func(i, n int)) *engine.Store {
	return &engine.Store{Root: root, Blobs: w.blobs, Journals: w.journals(), Workspace: w.path,
		Progress: func(p engine.Phase, i, n int) {
			switch {
			case p == engine.PhaseRecover:
				w.progress(PhaseRecover, i, n)
			case write != nil:
				write(i, n)
			}
		},
		Internal: func(err error) bool { return AsError(err).Code == CodeInternal }}
}

// writeProgress reports the steps of an op as they run: to the
// workspace's progress hook, and now and then to opt (an apply's
// ApplyOptions.Progress: steps done and steps in all), if set.
func (w *Workspace) writeProgress(opt func(done, total int)) func(i, n int) {
	return func(i, n int) {
		w.progress(PhaseWrite, i, n)
		if opt != nil && (i%256 == 0 || i == n-1) {
			opt(i+1, n)
		}
	}
}

// casReader checks change sets against the workspace (engine.Check) and
// keeps what it saw for the op that follows.
type casReader struct {
	root     *fsx.Root
	base     *tree.Manifest
	progress func(i, n int)
	// ident holds, per path, the workspace object the last check saw.
	ident map[string]fsx.Stat
}

// newCASReader returns a reader of root; base as engine.Check says.
func newCASReader(root *fsx.Root, base *tree.Manifest) *casReader {
	return &casReader{root: root, base: base, ident: map[string]fsx.Stat{}}
}

// check splits cs into the changes to write, those in place already, and
// the conflicts (see engine.Check).
func (c *casReader) check(ctx context.Context, cs []tree.Change) (todo, already []tree.Change, conflicts []Conflict, err error) {
	r, err := engine.Check(ctx, c.root, c.base, cs, c.progress)
	if err != nil {
		return nil, nil, nil, engineError(err)
	}
	c.ident = r.Ident
	return r.Todo, r.Already, engineConflicts(r.Conflicts), nil
}

// checked is what the executor needs of the last check: the changes to
// write, todo, and the objects it saw.
func (c *casReader) checked(todo []tree.Change) *engine.Checked {
	return &engine.Checked{Todo: todo, Ident: c.ident}
}

// keepPreimages stores the pre-images todo displaces (engine.KeepPreimages).
func keepPreimages(ctx context.Context, root *fsx.Root, store *blob.Store, batch *blob.Batch, todo []tree.Change, ident map[string]fsx.Stat) error {
	return engineError(engine.KeepPreimages(ctx, root, store, batch, todo, ident))
}

// entryAt reads what the workspace name rel holds now (engine.EntryAt).
func entryAt(ctx context.Context, root *fsx.Root, rel string, cr engine.ContentReader) (engine.NameAt, error) {
	at, err := engine.EntryAt(ctx, root, rel, cr)
	if err != nil {
		return at, AsError(err)
	}
	return at, nil
}

// engineConflicts returns the engine's conflicts as the package's.
func engineConflicts(cfs []engine.Conflict) []Conflict {
	if cfs == nil {
		return nil
	}
	out := make([]Conflict, len(cfs))
	for i, c := range cfs {
		out[i] = Conflict{Path: c.Path, Kind: string(c.Kind), Base: c.Base, Current: c.Current, Detail: c.Detail}
	}
	return out
}

// engineError returns an error of the engine as an *Error; any other
// error (the end of a context) as it is.
func engineError(err error) error {
	if ee, ok := err.(*engine.Error); ok {
		return fromEngine(ee)
	}
	return err
}

// engineError is the package's engineError, with the journal's errors
// told as errors of the workspace's state root.
func (w *Workspace) engineError(err error) error {
	if ee, ok := err.(*engine.Error); ok && ee.Kind == engine.ErrJournal {
		return stateIOError(w.stateDir, ee.What, ee.Err)
	}
	return engineError(err)
}

// firstError finds the first *Error or *engine.Error in err's tree, in
// the order errors.As looks.
func firstError(err error) (*Error, *engine.Error) {
	switch e := err.(type) {
	case nil:
		return nil, nil
	case *Error:
		return e, nil
	case *engine.Error:
		return nil, e
	case interface{ Unwrap() error }:
		return firstError(e.Unwrap())
	case interface{ Unwrap() []error }:
		for _, u := range e.Unwrap() {
			if a, b := firstError(u); a != nil || b != nil {
				return a, b
			}
		}
	}
	return nil, nil
}

// fromEngine is the *Error of an engine error: the code of its kind, and
// the repairs the command line renders.
func fromEngine(ee *engine.Error) *Error {
	switch ee.Kind {
	case engine.ErrChanged:
		return &Error{Code: CodeTargetChanged, Message: ee.Msg, Conflicts: engineConflicts(ee.Conflicts)}
	case engine.ErrUnstable:
		return &Error{Code: CodeUnstable, Err: ee.Err, Message: ee.Msg}
	case engine.ErrNotUndone:
		return &Error{Code: CodeInternal, Message: ee.Msg}
	case engine.ErrMarkerInDoubt:
		e := AsError(ee.Err)
		e.Repairs = append(e.Repairs, Repair{Action: "recover", Detail: "recover the workspace to learn whether the apply landed", Command: "wtx recover"})
		return e
	case engine.ErrLanded:
		e := *AsError(ee.Err)
		e.Message = fmt.Sprintf("%s %s landed in the workspace, but %s failed (%s); the next wtx command finishes it", ee.OpKind, ee.OpID, ee.What, e.Error())
		e.Err = ee.Err
		return &e
	case engine.ErrJournal:
		return AsError(fmt.Errorf("%s: %w", ee.What, ee.Err))
	case engine.ErrInterrupted:
		return &Error{Code: CodeInterruptedApply, Message: ee.Msg, Conflicts: engineConflicts(ee.Conflicts),
			Repairs: []Repair{
				{Action: "recover", Detail: "after putting the path back, finish the rollback", Command: "wtx recover"},
				{Action: "keep", Detail: "keep the changed paths as they are and roll back the rest", Command: "wtx recover --rollback"},
			}}
	case engine.ErrStepsFailed:
		code := AsError(ee.Errs[0]).Code
		if code == CodeInternal {
			code = CodeIO
		}
		return &Error{Code: code, Err: ee.Err, Message: ee.Msg,
			Repairs: []Repair{{Action: "recover", Detail: "fix the cause (permissions, disk), then recover again", Command: "wtx recover"}}}
	}
	return AsError(ee.Err) // engine.ErrCause: the cause's code
}
