package wtx

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/wtx-dev/wtx/internal/engine"
)

// TestEngineErrorsKeepTheirCodes: each kind of engine error becomes the
// *Error the package returned before the engine had a package of its own:
// the same code, message, conflicts and repairs, found wherever it is
// wrapped.
func TestEngineErrorsKeepTheirCodes(t *testing.T) {
	cf := engine.Conflict{Path: "a", Kind: engine.KindModified, Base: "absent", Current: "sha256:x", Detail: "d"}
	recorded := &Error{Code: CodeIO, Message: "record op op-1: disk"}
	cases := []struct {
		name    string
		err     error
		code    string
		msg     string
		repairs int
	}{
		{"changed", &engine.Error{Kind: engine.ErrChanged, Msg: "a changed", Conflicts: []engine.Conflict{cf}}, CodeTargetChanged, "a changed", 0},
		{"unstable", &engine.Error{Kind: engine.ErrUnstable, Msg: "a changed while it was read"}, CodeUnstable, "a changed while it was read", 0},
		{"not undone", &engine.Error{Kind: engine.ErrNotUndone, Msg: "apply failed"}, CodeInternal, "apply failed", 0},
		{"cause: no space", &engine.Error{Kind: engine.ErrCause, Err: fmt.Errorf("write: %w", syscall.ENOSPC)}, CodeNoSpace, "write: no space left on device", 0},
		{"cause: unknown", &engine.Error{Kind: engine.ErrCause, Err: errors.New("odd")}, CodeInternal, "odd", 0},
		{"marker in doubt", &engine.Error{Kind: engine.ErrMarkerInDoubt, Err: fmt.Errorf("commit op-1: %w", syscall.EIO)}, CodeIO, "commit op-1: input/output error", 1},
		{"landed", &engine.Error{Kind: engine.ErrLanded, OpKind: "apply", OpID: "op-1", What: "recording it", Err: recorded}, CodeIO,
			"apply op-1 landed in the workspace, but recording it failed (record op op-1: disk); the next wtx command finishes it", 0},
		{"landed, wrapped", fmt.Errorf("outer: %w", &engine.Error{Kind: engine.ErrLanded, OpKind: "undo", OpID: "op-2", What: "removing its journal", Err: fs.ErrPermission}), CodePermission,
			"undo op-2 landed in the workspace, but removing its journal failed (permission denied); the next wtx command finishes it", 0},
		{"interrupted", &engine.Error{Kind: engine.ErrInterrupted, Msg: "an apply (op-1) was interrupted", Conflicts: []engine.Conflict{cf}}, CodeInterruptedApply, "an apply (op-1) was interrupted", 2},
		{"steps failed: permission", &engine.Error{Kind: engine.ErrStepsFailed, Msg: "could not roll back", Errs: []error{fmt.Errorf("a: %w", fs.ErrPermission)}}, CodePermission, "could not roll back", 1},
		{"steps failed: unknown", &engine.Error{Kind: engine.ErrStepsFailed, Msg: "could not finish", Errs: []error{errors.New("odd")}}, CodeIO, "could not finish", 1},
		{"steps failed: an engine error first", &engine.Error{Kind: engine.ErrStepsFailed, Msg: "could not finish", Errs: []error{fmt.Errorf("a: %w", &engine.Error{Kind: engine.ErrUnstable, Msg: "u"})}}, CodeUnstable, "could not finish", 1},
	}
	for _, c := range cases {
		e := AsError(c.err)
		if e.Code != c.code || e.Message != c.msg || len(e.Repairs) != c.repairs {
			t.Errorf("%s: got %s %q (%d repairs), want %s %q (%d repairs)", c.name, e.Code, e.Message, len(e.Repairs), c.code, c.msg, c.repairs)
		}
		var ee *engine.Error
		if errors.As(c.err, &ee) && len(ee.Conflicts) > 0 {
			if len(e.Conflicts) != 1 || e.Conflicts[0] != (Conflict{Path: "a", Kind: "modified", Base: "absent", Current: "sha256:x", Detail: "d"}) {
				t.Errorf("%s: conflicts %+v", c.name, e.Conflicts)
			}
		}
	}
	// An *Error around an engine error is the *Error: the outer one was
	// made from it already.
	outer := &Error{Code: CodeUsage, Message: "outer", Err: &engine.Error{Kind: engine.ErrNotUndone, Msg: "inner"}}
	if e := AsError(fmt.Errorf("wrapped: %w", outer)); e != outer {
		t.Errorf("an *Error around an engine error: got %v, want the *Error", e)
	}
	// The journal's errors are the state root's.
	w := &Workspace{stateDir: "/state"}
	e := AsError(w.engineError(&engine.Error{Kind: engine.ErrJournal, What: "write the journal of op-1", Err: syscall.EROFS}))
	if e.Code != CodeReadOnly || !strings.Contains(e.Message, "write the journal of op-1 in the state root /state") {
		t.Errorf("journal error: %s %q", e.Code, e.Message)
	}
}
