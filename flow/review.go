package flow

// A stage a flow step kept for review holds the command's output and,
// once a person looked at it, maybe their own edits (per-file ops, a run
// in it, a rebase): no flow action drops it unasked (T-008). A resume
// whose apply of it is refused (drift, a protected path, a busy stage …)
// keeps it and stops the run for a decision; skipping the step or
// abandoning the run drops it only while it holds exactly what the step
// left there.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/quote"
)

// reviewRepairs are the repairs of a refused apply that a person can take
// on a kept stage before a resume applies it again, as a flow words them.
var reviewRepairs = map[wtx.RepairAction]string{
	wtx.RepairRebase:      "carry the step's change, with any edits in it, onto the workspace's current content, then resume",
	wtx.RepairRebaseMerge: "merge the drifted files three-way (the step's change and the workspace's both land), then resume",
	wtx.RepairApprove:     "apply it yourself with its protected paths approved; a resume then records the step done",
	wtx.RepairReview:      "look at the step's change",
}

// keepReviewed records that a resume's apply of a stage kept for review
// failed with err: the attempt stays in review, with the refusal and the
// repairs it offered; the stage stays open.
func (w *runner) keepReviewed(ctx context.Context, run string, n, attempt int, res *StepResult, created time.Time, err error, progress func(StepStatus)) error {
	if errors.Is(err, context.Canceled) {
		// Interrupted: the apply rolled back, and the attempt stays in
		// review as it was.
		return err
	}
	ctx = context.WithoutCancel(ctx)
	e := wtx.AsError(err)
	res.Error = &wtx.Refusal{Code: e.Code, Message: e.Message}
	res.Repairs = nil
	for _, r := range e.Repairs {
		if d, ok := reviewRepairs[r.Action]; ok && (r.Stage == res.StageID || r.Stage == "") {
			// Paths can be many; the stage's own status names them.
			res.Repairs = append(res.Repairs, wtx.Repair{Action: r.Action, Class: r.Class, Detail: d, Stage: res.StageID})
		}
	}
	if perr := w.putStep(ctx, run, n, attempt, StepReview, res, created); perr != nil {
		return perr
	}
	progress(StepReview)
	return nil
}

// refusedReviewRepairs are the ways on from a stage kept for review whose
// apply was refused: what the refusal offered, then looking at it and
// dropping it (a resume then runs the step again).
func refusedReviewRepairs(a *StepAttempt) []wtx.Repair {
	out := []wtx.Repair{}
	review := false
	for _, r := range a.Result.Repairs {
		out = append(out, r)
		review = review || r.Action == wtx.RepairReview
	}
	if !review {
		out = append(out, wtx.Repair{Action: wtx.RepairReview, Detail: "look at the step's change", Stage: a.StageID})
	}
	return append(out, wtx.Repair{Action: wtx.RepairRestage, Detail: "drop it, the step's change and any edits in it; a resume then runs the step again", Stage: a.StageID})
}

// checkReviewUntouched refuses action (skipping a step, abandoning a run)
// when the stage that step n's attempt a kept for review is open and holds
// other changes than the step left there, or when that cannot be told.
func (w *runner) checkReviewUntouched(ctx context.Context, run *Run, n int, a *StepAttempt, action string) error {
	if failpoint.Disabled("flow-keep-reviewed") || a.StageID == "" {
		return nil
	}
	st, err := w.ws.Stage(ctx, a.StageID)
	if err != nil {
		if wtx.AsError(err).Code == wtx.CodeStageNotFound {
			return nil
		}
		return err
	}
	if st.State() != wtx.StateOpen {
		return nil
	}
	cs, err := st.Changes(ctx, nil)
	if err != nil {
		return err
	}
	if a.Result != nil && a.Result.ChangesetDigest != "" && cs.Digest == a.Result.ChangesetDigest {
		return nil
	}
	return &wtx.Error{Code: wtx.CodeChangedSinceReview,
		Message: fmt.Sprintf("step %s of %s kept stage %s for review, and it holds changes made since (%d changed path(s) now, first %s); %s would drop them: nothing was done",
			quote.Text(run.Steps[n].Name), run.ID, st.ID(), len(cs.Changes), firstChangedPath(cs), action),
		Repairs: []wtx.Repair{
			{Action: wtx.RepairReview, Detail: "look at what the stage holds", Stage: st.ID()},
			{Action: wtx.RepairRestage, Detail: "drop it yourself if its changes are not wanted, then do this again", Stage: st.ID()},
		}}
}

// firstChangedPath names the first path of cs for a message.
func firstChangedPath(cs *wtx.ChangeSet) string {
	if len(cs.Changes) == 0 {
		return "none"
	}
	return quote.Path(cs.Changes[0].Path)
}

// reviewedApproval is whether a resume's apply of a stage its step kept for
// review approves protected paths: the flow file's approve covers what the
// step's command left, so only while the stage holds exactly that (its
// change-set digest is the one the step recorded). Anything written into
// it since (a person's edits, an agent's write, a rebase) was approved by
// no one yet: a person applies it with approval, and a resume then records
// the step done.
func reviewedApproval(ctx context.Context, s *wtx.Stage, step *Step, res *StepResult) (bool, error) {
	if !step.Approve || failpoint.Disabled("flow-review-approve") {
		return step.Approve, nil
	}
	cs, err := s.Changes(ctx, nil)
	if err != nil {
		return false, err
	}
	return res != nil && res.ChangesetDigest != "" && cs.Digest == res.ChangesetDigest, nil
}

// dropReviewed drops the stage step n's attempt a kept for review, for
// action (skipping the step, abandoning the run), only while it holds
// exactly what the step left: checked under the stage's locks, and refused
// while a command runs in it, so that no edit lands between the check and
// the drop. A person's command running in it is a review under way.
func (w *runner) dropReviewed(ctx context.Context, run *Run, n int, a *StepAttempt, action string) error {
	if failpoint.Disabled("flow-review-race") {
		// Negative control: checked first, then dropped once whatever runs
		// in it has ended, edits made meanwhile and all.
		if err := w.checkReviewUntouched(ctx, run, n, a, action); err != nil {
			return err
		}
		return w.dropStepStage(ctx, run.ID, n, a)
	}
	ref := a.StageID
	if ref == "" {
		ref = stepStageName(run.ID, n, a.Attempt)
	}
	st, err := w.ws.Stage(ctx, ref)
	if err != nil {
		if wtx.AsError(err).Code == wtx.CodeStageNotFound {
			return nil
		}
		return err
	}
	if err := link().AuthorizeDrop(w.ws); err != nil {
		return err
	}
	return link().DropChecked(ctx, st, func() error { return w.checkReviewUntouched(ctx, run, n, a, action) })
}

// checkFlowOnly refuses to drop st, the stage an interrupted attempt of
// step n of run left, when it holds an op the run did not make: a
// person's (or an agent's) edit made after the kill, which a resume would
// drop to run the step again (T-008). Every op the run makes names its
// attempt (wtx.TxOp.Flow).
func checkFlowOnly(ctx context.Context, run *Run, n int, st *wtx.Stage) error {
	if failpoint.Disabled("flow-keep-edited") {
		return nil
	}
	op, err := foreignOp(ctx, run, st)
	if err != nil || op == nil {
		return err
	}
	return &wtx.Error{Code: wtx.CodeChangedSinceReview,
		Message: fmt.Sprintf("step %s of %s was interrupted, and its stage %s holds op %d (%s) that the run did not make; resuming would drop it to run the step again: nothing was done",
			quote.Text(run.Steps[n].Name), run.ID, st.ID(), op.Seq, op.Kind),
		Repairs: []wtx.Repair{
			{Action: wtx.RepairReview, Detail: "look at what the stage holds", Stage: st.ID()},
			{Action: wtx.RepairRestage, Detail: "drop it yourself if its changes are not wanted, then resume", Stage: st.ID()},
		}}
}

// checkLineageOwn refuses to carry a fork's line, the stage from that
// keeps the state after step n-1, into step n when it holds an op the run
// did not make: written into by someone else (a person, an agent), it
// would land as part of step n, under the step's approval and nobody's
// review.
func checkLineageOwn(ctx context.Context, run *Run, n int, from *wtx.Stage) error {
	if failpoint.Disabled("flow-lineage-own") {
		return nil
	}
	op, err := foreignOp(ctx, run, from)
	if err != nil || op == nil {
		return err
	}
	return &wtx.Error{Code: wtx.CodeChangedSinceReview,
		Message: fmt.Sprintf("stage %s, which keeps fork %s's state for step %s, holds op %d (%s) that the run did not make; it would land as part of the step: the step does not run",
			from.ID(), run.ID, quote.Text(run.Steps[n].Name), op.Seq, op.Kind),
		Repairs: []wtx.Repair{
			{Action: wtx.RepairReview, Detail: "look at what the stage holds", Stage: from.ID()},
			{Action: "drop-op", Detail: fmt.Sprintf("take op %d and those after it out of the stage, then resume", op.Seq), Stage: from.ID()},
		}}
}

// foreignOp is the first op of st that run did not make, or nil.
func foreignOp(ctx context.Context, run *Run, st *wtx.Stage) (*wtx.TxOp, error) {
	ops, err := st.TxOps(ctx)
	if err != nil {
		return nil, err
	}
	prefix := "flow." + strings.TrimPrefix(run.ID, "run-") + "."
	for i := range ops {
		if !strings.HasPrefix(ops[i].Flow, prefix) {
			return &ops[i], nil
		}
	}
	return nil, nil
}
