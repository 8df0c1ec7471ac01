// Package flow runs flows: durable multi-step runs over a wtx workspace.
// A flow file (TOML, version 1) names its steps: a command run in a
// stage, per-file ops (the batch language), or an agent's proposal checked
// against an allowlist. Each step is one stage; a step that applies is one
// op, and its result is recorded with that op, in the same transaction
// (W-001), so that a resume after a crash runs exactly the steps without a
// result (W-002).
//
// Parse reads a flow file; Start runs it in a workspace, Resume goes on
// with a stopped run, Fork starts a new run from the state after one of a
// run's steps, Abandon stops one for good; Runs and Show read them.
package flow

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/annotation"
	"github.com/wtx-dev/wtx/internal/flowlink"
	"github.com/wtx-dev/wtx/internal/state"
)

// Runs lists ws's flow runs, oldest first. It reads only.
func Runs(ctx context.Context, ws *wtx.Workspace) ([]*Run, error) {
	return newRunner(ws).runs(ctx)
}

// Show finds a run of ws by id, unique id prefix or name. It reads only: it
// runs nothing and touches no workspace (W-003).
func Show(ctx context.Context, ws *wtx.Workspace, ref string) (*Run, error) {
	return newRunner(ws).find(ctx, ref)
}

// Start starts a new run of def in ws and runs its steps in order until
// one fails or stops for review, or all are done. The run keeps the bytes
// def was parsed from and runs what they say: a Def changed after Parse
// runs as parsed, and one Parse did not make is refused.
func Start(ctx context.Context, ws *wtx.Workspace, def *Def, opts Options) (*Run, error) {
	return newRunner(ws).start(ctx, def, opts)
}

// Resume continues run ref at its first step without a result. A step
// interrupted before its apply committed is rolled back (by the journal's
// recovery when the workspace opened) and runs again; a step with a result
// never runs again; a step with external effects that was interrupted stops
// the run for a decision (opts.Retry or opts.Skip) (W-002).
func Resume(ctx context.Context, ws *wtx.Workspace, ref string, opts Options) (*Run, error) {
	return newRunner(ws).resume(ctx, ref, opts)
}

// Abandon marks run ref abandoned: it never runs again. What its steps
// applied stays; stages it kept for review are dropped, unless one holds
// changes made since its step kept it (a person's edits, a rebase): then
// nothing is done and the refusal names it (T-008).
func Abandon(ctx context.Context, ws *wtx.Workspace, ref string) (*Run, error) {
	return newRunner(ws).abandon(ctx, ref)
}

// Fork starts a new run of run ref's pinned definition from the state
// right after its step at (a name or a number from 1): the steps up to it
// are shared (their recorded results are the new run's too, never run
// again), the next step's stage opens on the workspace as it was right
// after the last op of those steps (wtx.BeginOptions.At), and the run goes
// on from there. The original run is left as it is. Each forked step lands
// through the ordinary checks against the current workspace (W-004).
func Fork(ctx context.Context, ws *wtx.Workspace, ref, at string, opts Options) (*Run, error) {
	return newRunner(ws).fork(ctx, ref, at, opts)
}

// wsLink is the root package's link, with its types.
type wsLink = flowlink.Link[*wtx.Workspace, *wtx.Stage, *wtx.ChangeSet, *wtx.ApplyOptions, wtx.BatchItem]

// link returns the workspace internals the root package hands flow.
func link() *wsLink { return flowlink.Root.(*wsLink) }

// runner runs and reads the flow runs of one workspace.
type runner struct {
	ws *wtx.Workspace
}

func newRunner(ws *wtx.Workspace) *runner { return &runner{ws: ws} }

func (w *runner) db() *state.DB    { return link().DB(w.ws) }
func (w *runner) id() string       { return link().ID(w.ws) }
func (w *runner) now() time.Time   { return link().Now(w.ws) }
func (w *runner) stateDir() string { return link().StateDir(w.ws) }

func errorf(code, format string, args ...any) *wtx.Error {
	return &wtx.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func init() {
	annotation.Register(annotation.FlowStep, recordStep)
	flowlink.CheckRun = func(run state.FlowRun, steps []state.FlowStep) error {
		_, err := assembleRun(run, steps)
		return err
	}
}

// recordStep is the recorder of a flow step's annotation: it writes the
// step's row in tx, the transaction that records its op.
func recordStep(ctx context.Context, tx *state.Txn, note []byte, at time.Time) error {
	var r flowStepRecord
	if err := json.Unmarshal(note, &r); err != nil {
		// Damaged in the journal: io.corrupt, as a damaged op record is.
		return fmt.Errorf("%w: the flow step the op carries: %v", state.ErrCorrupt, err)
	}
	row, err := r.row(at)
	if err != nil {
		return err
	}
	return tx.PutFlowStep(ctx, row)
}
