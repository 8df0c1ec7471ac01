package wtx

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/journal"
	"github.com/wtx-dev/wtx/internal/jsonname"
	"github.com/wtx-dev/wtx/internal/stage"
	"github.com/wtx-dev/wtx/internal/state"
	"github.com/wtx-dev/wtx/receipt"
)

// Error codes, as in the JSON "error.code" field. The part before the dot is
// the class: usage and precondition errors, not-found, refusals (nothing was
// changed), I/O errors and internal errors.
const (
	CodeUsage                = "usage.invalid"
	CodeNotDir               = "precondition.not-a-directory"
	CodeWorkspaceMissing     = "precondition.workspace-missing"
	CodeWorkspaceForbidden   = "precondition.workspace-forbidden"
	CodeStateInWorkspace     = "precondition.state-in-workspace"
	CodeSpecialFile          = "precondition.special-file"
	CodeUnstable             = "precondition.file-changed-while-read"
	CodeUnsupported          = "precondition.unsupported"
	CodeStageSettled         = "precondition.stage-settled"
	CodeMountPoint           = "precondition.mount-point"
	CodeAmbiguousStage       = "usage.ambiguous-stage"
	CodeNameTaken            = "usage.name-taken"
	CodeProjectFile          = "usage.project-file" // the workspace's .wtx.toml cannot be used
	CodeStageNotFound        = "not-found.stage"
	CodeOpNotFound           = "not-found.op"
	CodeCommandNotFound      = "not-found.command"
	CodeNoStage              = "not-found.no-open-stage"
	CodeTargetChanged        = "refusal.target-changed"
	CodeStaleRead            = "refusal.stale-read"
	CodeProtected            = "refusal.protected"
	CodeBoundary             = "refusal.boundary"
	CodeDropped              = "refusal.dropped"
	CodeChangedSinceReview   = "refusal.changed-since-review"
	CodeInterruptedApply     = "refusal.interrupted-apply"
	CodeLocked               = "refusal.locked"
	CodeNoSpace              = "io.no-space"
	CodePermission           = "io.permission"
	CodeReadOnly             = "io.read-only"
	CodeIO                   = "io.error"
	CodeInternal             = "internal"
	CodeCommandNotExecutable = "precondition.command-not-executable"
	CodeAlreadyUndone        = "precondition.already-undone"
	CodeReceiptInvalid       = "precondition.receipt-invalid"
	CodeEditNoMatch          = "precondition.edit-no-match"
	CodeEditAmbiguous        = "precondition.edit-ambiguous"
	CodeFileNotFound         = "not-found.file"
	CodeTxOpNotFound         = "not-found.tx-op"
	CodeNoMatch              = "not-found.path" // a selector (path, exclude) matches no path of the change set

	// Second round: lifecycle and integrity.
	CodeStageBusy   = "refusal.stage-busy"        // a process started in the stage is alive (L-001)
	CodeInsideStage = "precondition.inside-stage" // wtx was run inside a stage's view (L-003)
	CodeStateUnsafe = "precondition.state-unsafe" // state root owned by another user or writable by others (I-004)
	CodeConfinement = "precondition.confinement"  // --read-only / --no-network cannot be given here (L-006)
	CodeCorrupt     = "io.corrupt"                // stored content or state does not match its digest (I-002, I-005)
	CodeStateLost   = "io.state-missing"          // database, journal or blob that should exist is gone (I-005)
	CodeReserved    = "usage.reserved-name"       // a name wtx keeps for itself (.wtx-tmp-*)

	// Third round: trust boundaries.
	CodeUntrustedOwner = "precondition.untrusted-owner" // a workspace boundary or project file another user controls (T-004)

	// Flows.
	CodeRunNotFound     = "not-found.run"              // no flow run by that id or name
	CodeRunAbandoned    = "precondition.run-abandoned" // the flow run was abandoned
	CodeStepFailed      = "precondition.step-failed"   // a step's command failed or timed out (recorded in its result)
	CodeProposalRefused = "refusal.proposal"           // an agent's proposal leaves the step's allowlist (W-005)

	// Third round: trust boundaries.
	CodeNotPermitted = "refusal.not-permitted" // the actor may not take this action (T-003's table)

	// Received change sets.
	CodeUnverified  = "refusal.unverified" // an import requires a signature (or a trusted signer) the change set lacks (T-005)
	CodeKeyNotFound = "not-found.key"      // no key of the trust file matches (T-005)
)

// Sentinel errors that callers branch on. Every *Error wraps the sentinel of
// its class, so errors.Is(err, ErrRefused) tells a refusal.
var (
	ErrUsage        = errors.New("usage")
	ErrPrecondition = errors.New("precondition")
	ErrNotFound     = errors.New("not found")
	ErrRefused      = errors.New("refused")
	ErrIO           = errors.New("i/o error")
	ErrInternal     = errors.New("internal error")
)

// RepairAction names a way out of a refusal (an alias: the answer
// types and older code spell actions as strings). The library says what to do
// and to which stage and paths; the command line and MCP render it in their
// users' terms (a command, a tool call).
type RepairAction = string

// Repair actions the apply engine offers.
const (
	// RepairRebase: carry the stage's edits onto the workspace's current
	// content, then apply again.
	RepairRebase RepairAction = "rebase"
	// RepairRebaseMerge: merge the drifted files three-way, then apply
	// again.
	RepairRebaseMerge RepairAction = "merge"
	// RepairExclude: apply the rest; Paths stay staged.
	RepairExclude RepairAction = "exclude"
	// RepairReread: read Paths again in the stage and check its changes
	// still hold; the stale reads then clear.
	RepairReread RepairAction = "re-read"
	// RepairIgnoreStale: apply with the stale reads ignored.
	RepairIgnoreStale RepairAction = "ignore"
	// RepairApprove: a person approves the protected Paths.
	RepairApprove RepairAction = "approve"
	// RepairRestage: drop the stage and redo its work on the current
	// workspace.
	RepairRestage RepairAction = "restage"
	// RepairReview: look at the change set again.
	RepairReview RepairAction = "review"
	// RepairDropOp: drop op TxOp of the stage and every later one.
	RepairDropOp RepairAction = "drop-op"
	// RepairPerson: a person does it; the actor asking may not (T-003).
	RepairPerson RepairAction = "person"
	// RepairTrustKey: add the signer's public key to the trust file of
	// receipt keys, once it is known to be theirs (Detail names the key).
	RepairTrustKey RepairAction = "trust-key"
	// RepairResolve: remove the conflict markers a rebase left in Paths,
	// or take one side whole (Stage.Resolve).
	RepairResolve RepairAction = "resolve"
)

// Repair is a way out of a refusal. Class says which conflicts it answers
// (empty: the refusal as a whole). Action, Stage and Paths are what a
// program acts on; Command is a rendering for people (the command line
// fills it where the library left it empty).
type Repair struct {
	Action  RepairAction  `json:"action"`
	Class   ConflictClass `json:"class,omitempty"`
	Detail  string        `json:"detail"`
	Stage   string        `json:"tx,omitempty"`
	Paths   []string      `json:"paths,omitempty" jsonname:"b64"`
	Command string        `json:"command,omitempty"`
	// TxOp is the op of the stage a drop-op repair names. Not in the
	// JSON of a repair, which has never carried it (the command line
	// renders it into Command).
	TxOp int `json:"-"`
	// Op is the op a repair of an undo acts on. Not in the JSON, as TxOp.
	Op string `json:"-"`
}

// MarshalJSON writes the repair with byte-safe paths.
func (r Repair) MarshalJSON() ([]byte, error) { return jsonname.Marshal(r) }

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Repair) UnmarshalJSON(data []byte) error { return jsonname.Unmarshal(data, r) }

// ConflictClass groups conflicts by what a person does about them.
type ConflictClass string

// Conflict classes, in the order an apply reports them.
const (
	// ClassBoundary: the path cannot be written without leaving the
	// workspace or writing through a link or a shared inode.
	ClassBoundary ConflictClass = "boundary"
	// ClassProtected: the path is protected and the apply is not approved.
	ClassProtected ConflictClass = "protected"
	// ClassDrift: the workspace path changed since the stage's base.
	ClassDrift ConflictClass = "drift"
	// ClassStaleRead: a file the stage read changed in the workspace since.
	ClassStaleRead ConflictClass = "stale-read"
	// ClassUnrecorded: staged content that no op of the stage records
	// (T-007); never applied.
	ClassUnrecorded ConflictClass = "unrecorded"
)

// Class returns the conflict's class, from its kind.
func (c Conflict) Class() ConflictClass {
	switch c.Kind {
	case "boundary", "symlink", "shared-inode":
		return ClassBoundary
	case "protected":
		return ClassProtected
	case "stale-read":
		return ClassStaleRead
	case "unrecorded":
		return ClassUnrecorded
	}
	return ClassDrift
}

// Conflict is one path that blocks an apply.
type Conflict struct {
	Path string `json:"path" jsonname:"b64"`
	// In JSON, Kind is followed by the conflict's class (Class).
	Kind    string `json:"kind" jsonname:"then:class=Class"` // what happened: "modified", "created", "deleted", "type-changed", "added-inside-deleted-dir" (drift), "symlink", "boundary", "shared-inode" (boundary), "protected", "stale-read", "rebase", "expect-hash"
	Base    string `json:"base,omitempty"`                   // digest (or "absent") the stage expected
	Current string `json:"current,omitempty"`                // digest (or "absent") found now
	Detail  string `json:"detail,omitempty"`
	// Op names the op that wrote the path since, when one did (an undo
	// refused because a later op wrote the path).
	Op string `json:"op_id,omitempty"`
}

// MarshalJSON writes the conflict with a byte-safe path and its class.
func (c Conflict) MarshalJSON() ([]byte, error) { return jsonname.Marshal(c) }

// UnmarshalJSON reads what MarshalJSON writes (the class is derived, not
// read).
func (c *Conflict) UnmarshalJSON(data []byte) error { return jsonname.Unmarshal(data, c) }

// Error is the error type of the wtx API. Code is one of the Code constants.
type Error struct {
	Code      string
	Message   string
	Repairs   []Repair
	Conflicts []Conflict
	// Diagnostics, for an answer about several elements (a batch's
	// commands or lines), say how each one fared.
	Diagnostics []Diagnostic
	Err         error // the cause, if any
}

// Diagnostic is how one element of a batch fared: ok, or the error that
// element alone met (Code and Message). Index counts from 1, in input
// order; Line is the input line, when the element came from one.
type Diagnostic struct {
	Index   int    `json:"index"`
	Line    int    `json:"line,omitempty"`
	Command string `json:"command,omitempty"`
	Path    string `json:"path,omitempty" jsonname:"b64"`
	Status  string `json:"status"` // DiagOK, DiagError or DiagSkipped
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// MarshalJSON writes the diagnostic with a byte-safe path.
func (d Diagnostic) MarshalJSON() ([]byte, error) { return jsonname.Marshal(d) }

// Diagnostic statuses.
const (
	DiagOK      = "ok"
	DiagError   = "error"
	DiagSkipped = "skipped" // not run: the input could not be read as a whole
)

func (e *Error) Error() string {
	if e.Err != nil && e.Message == "" {
		return e.Err.Error()
	}
	return e.Message
}

// Unwrap returns the class sentinel and the cause.
func (e *Error) Unwrap() []error {
	errs := []error{classSentinel(e.Code)}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// ExitCode is the process exit status the CLI uses for the error: 2 for a
// refusal, 1 otherwise.
func (e *Error) ExitCode() int {
	if strings.HasPrefix(e.Code, "refusal.") {
		return 2
	}
	return 1
}

func classSentinel(code string) error {
	class, _, _ := strings.Cut(code, ".")
	switch class {
	case "usage":
		return ErrUsage
	case "precondition":
		return ErrPrecondition
	case "not-found":
		return ErrNotFound
	case "refusal":
		return ErrRefused
	case "io":
		return ErrIO
	}
	return ErrInternal
}

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// AsError converts any error into an *Error, classifying system errors
// (disk full, permission, read-only filesystem) into io.* codes.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	if e, ee := firstError(err); e != nil {
		return e
	} else if ee != nil {
		return fromEngine(ee) // the engine's errors, as the package's
	}
	code := CodeInternal
	switch {
	case errors.Is(err, receipt.ErrKey):
		code = CodeUsage
	case errors.Is(err, receipt.ErrInvalid):
		code = CodeReceiptInvalid
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		code = CodeNoSpace
	case errors.Is(err, syscall.EROFS):
		code = CodeReadOnly
	case errors.Is(err, fs.ErrPermission):
		code = CodePermission
	case errors.Is(err, blob.ErrCorrupt), errors.Is(err, blob.ErrDamaged):
		code = CodeCorrupt
	case errors.Is(err, stage.ErrLinkedSelector):
		code = CodeBoundary
	case errors.Is(err, blob.ErrMissing), errors.Is(err, stage.ErrViewInDoubt):
		code = CodeStateLost
	case errors.Is(err, state.ErrCorrupt), errors.Is(err, journal.ErrCorrupt):
		code = CodeCorrupt
	case errors.Is(err, state.ErrReadOnly):
		code = CodeReadOnly
	case errors.Is(err, state.ErrCantOpen):
		code = CodePermission
	case errors.Is(err, syscall.EIO):
		code = CodeIO
	default:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			code = CodeIO
		}
	}
	return &Error{Code: code, Message: err.Error(), Err: err}
}

// Error makes a *Conflict usable as an error inside the apply engine.
func (c *Conflict) Error() string { return c.Path + ": " + c.Kind }
