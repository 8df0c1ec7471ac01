// Package flowlink joins package flow, which stands on wtx's public API,
// to the few workspace internals a flow run needs that the public API does
// not offer: the state database that keeps flow runs, the stage's locks a
// drop checks under, what a stage value stages for, and the whole change
// set behind a selection. The root package fills in Root when it loads;
// flow reads it. Nothing else sets or reads it.
//
// The other way, flow hands the root package CheckRun, which fsck asks of
// every flow run it finds.
package flowlink

import (
	"context"
	"time"

	"github.com/wtx-dev/wtx/internal/state"
	"github.com/wtx-dev/wtx/internal/tree"
)

// Link is what the root package hands flow. W is *wtx.Workspace, S
// *wtx.Stage, C *wtx.ChangeSet, A *wtx.ApplyOptions and I wtx.BatchItem:
// the type parameters keep this package below the root.
type Link[W, S, C, A, I any] struct {
	// DB is the workspace's state database, ID its id, Now its clock and
	// StateDir its private directory in the state root.
	DB       func(W) *state.DB
	ID       func(W) string
	Now      func(W) time.Time
	StateDir func(W) string
	// AuthorizeDrop asks whether the workspace's actor may drop a stage.
	AuthorizeDrop func(W) error
	// DropChecked drops s when check, asked under the stage's locks,
	// passes.
	DropChecked func(ctx context.Context, s S, check func() error) error
	// SetAttempt names the flow step attempt s stages for: every op made
	// through s records it.
	SetAttempt func(s S, attempt string)
	// StagedFile is the content of a file as s holds it (nil: none).
	StagedFile func(ctx context.Context, s S, path string) ([]byte, error)
	// AllChanges is the whole change set behind c's selection, and
	// ResultDigest the digest an apply of all of it computes ("" when c
	// has no base).
	AllChanges   func(c C) []tree.Change
	ResultDigest func(c C) string
	// AsAgent makes an apply run on the authority of a flow's agent step.
	AsAgent func(a A)
	// BatchItem reads a batch op as the batch language does.
	BatchItem func(BatchOp) (I, error)
	// NewID makes an id with prefix; ValidName checks a user-given name;
	// ValidOpPath checks a per-file op's path.
	NewID       func(prefix string, now time.Time) string
	ValidName   func(string) bool
	ValidOpPath func(string) error
}

// BatchOp is one per-file op in the fields of the batch language.
type BatchOp struct {
	Command    string
	Path       string
	PathB64    string
	Content    *string
	ContentB64 *string
	Old        string
	OldB64     string
	New        *string
	NewB64     *string
	All        bool
	ExpectHash string
}

// Root is the root package's *Link, set when it loads.
var Root any

// CheckRun is set by package flow when it loads; it checks that a stored flow
// run's definition and step records hold together (nil when flow is not
// linked into the program).
var CheckRun func(run state.FlowRun, steps []state.FlowStep) error
