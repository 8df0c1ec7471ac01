package flow

import (
	"context"
	"crypto/sha256"
	"fmt"
	"hash"
	"slices"
	"strings"
	"time"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/tree"
)

// continueFlow runs run id's steps from its first without a result.
func (w *runner) continueFlow(ctx context.Context, id string, opts Options) (*Run, error) {
	release, err := w.lockFlowRun(id)
	if err != nil {
		return nil, err
	}
	_, err = w.continueLocked(ctx, id, opts)
	release()
	if err != nil {
		return nil, err
	}
	// Read once the run is released, so that it is not seen as running.
	return w.find(ctx, id)
}

// continueLocked is continueFlow with the run's lock held.
func (w *runner) continueLocked(ctx context.Context, id string, opts Options) (*Run, error) {
	run, err := w.find(ctx, id)
	if err != nil {
		return nil, err
	}
	if run.row.Abandoned {
		return nil, &wtx.Error{Code: wtx.CodeRunAbandoned, Message: fmt.Sprintf("flow run %s was abandoned; it runs no more", id),
			Repairs: []wtx.Repair{{Action: "fork", Detail: "start a new run from the state after one of its steps", Command: "wtx flow fork " + id + " --at STEP"}}}
	}
	skip := opts.Skip
	if failpoint.Disabled("flow-resume") {
		if run, err = w.rerunAll(ctx, run, opts); err != nil {
			return nil, err
		}
	}
	for {
		n := run.next()
		if n == len(run.Steps) {
			break
		}
		step := &run.def.Steps[n]
		a := run.Steps[n].latest()
		attempt := 1
		if a != nil {
			attempt = a.Attempt + 1
		}
		// An attempt found started was interrupted: whatever its stage
		// holds goes (an apply that committed was recorded with it).
		if a != nil && a.Status == StepStarted {
			if err := w.dropStepStageChecked(ctx, id, n, a, func(st *wtx.Stage) error { return checkFlowOnly(ctx, run, n, st) }); err != nil {
				return nil, err
			}
			if err := w.putStep(ctx, id, n, a.Attempt, StepInterrupted, a.Result, a.Created); err != nil {
				return nil, err
			}
			a.Status = StepInterrupted
		}
		switch {
		case skip:
			skip = false
			if a != nil && a.Status == StepReview {
				if err := w.dropReviewed(ctx, run, n, a, "skipping the step"); err != nil {
					return nil, err
				}
			}
			res := &StepResult{Step: step.Name, Kind: step.Kind}
			if err := w.putStep(ctx, id, n, attempt, StepSkipped, res, w.now().UTC()); err != nil {
				return nil, err
			}
		case a != nil && a.Status == StepInterrupted && !step.IsIdempotent() && !opts.Retry && !failpoint.Disabled("in-doubt"):
			return w.find(ctx, id)
		case a != nil && a.Status == StepReview:
			stop, err := w.applyReviewed(ctx, run, n, a, opts)
			if err != nil {
				return nil, err
			}
			if stop {
				return w.find(ctx, id)
			}
		default:
			stop, err := w.execStep(ctx, run, n, attempt, opts)
			if err != nil {
				return nil, err
			}
			if stop {
				return w.find(ctx, id)
			}
		}
		if run, err = w.find(ctx, id); err != nil {
			return nil, err
		}
	}
	if run.ForkedFrom != "" {
		// Done: the fork's line is kept no longer.
		for i := range run.Steps {
			if err := w.dropStageNamed(ctx, lineageName(id, i)); err != nil {
				return nil, err
			}
		}
	}
	return run, nil
}

// rerunAll is the negative control of flow-resume: a resume runs every
// step behind the run again, like a CI re-run of the whole job.
func (w *runner) rerunAll(ctx context.Context, run *Run, opts Options) (*Run, error) {
	for n := 0; n < run.next(); n++ {
		a := run.Steps[n].latest()
		if _, err := w.execStep(ctx, run, n, a.Attempt+1, opts); err != nil {
			return nil, err
		}
	}
	return w.find(ctx, run.ID)
}

// lineageName names the stage that keeps a fork's state after its step.
func lineageName(run string, step int) string {
	return fmt.Sprintf("flow.%s.after%d", strings.TrimPrefix(run, "run-"), step+1)
}

// dropStageNamed drops the open stage named name, if there is one.
func (w *runner) dropStageNamed(ctx context.Context, name string) error {
	ss, err := w.ws.Stages(ctx)
	if err != nil {
		return err
	}
	for _, s := range ss {
		if s.Name() == name && s.State() == wtx.StateOpen {
			return w.dropStepStage(ctx, "", 0, &StepAttempt{StageID: s.ID()})
		}
	}
	return nil
}

// putStep records a step attempt in its own transaction.
func (w *runner) putStep(ctx context.Context, run string, step, attempt int, status StepStatus, res *StepResult, created time.Time) error {
	rec := flowStepRecord{RunID: run, Step: step, Attempt: attempt, Status: status, CreatedAt: created}
	if res != nil {
		rec.Result = *res
	}
	row, err := rec.row(w.now().UTC())
	if err != nil {
		return wtx.AsError(err)
	}
	if err := w.db().PutFlowStep(ctx, row); err != nil {
		return wtx.AsError(err)
	}
	return nil
}

// capture keeps the first limit bytes written to it and digests them all.
type capture struct {
	limit int
	kept  []byte
	size  int64
	h     hash.Hash
}

func newCapture(limit int) *capture { return &capture{limit: limit, h: sha256.New()} }

func (c *capture) Write(p []byte) (int, error) {
	c.h.Write(p)
	c.size += int64(len(p))
	if room := c.limit - len(c.kept); room > 0 {
		c.kept = append(c.kept, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (c *capture) digest() string { return fmt.Sprintf("sha256:%x", c.h.Sum(nil)) }

// execStep runs one attempt of step n. It reports whether the run stops
// there (a failure, or a stage kept for review).
func (w *runner) execStep(ctx context.Context, run *Run, n, attempt int, opts Options) (stop bool, err error) {
	step := &run.def.Steps[n]
	created := w.now().UTC()
	res := &StepResult{Step: step.Name, Kind: step.Kind, Command: step.Command, Effects: step.Effects}
	if err := w.putStep(ctx, run.ID, n, attempt, StepStarted, res, created); err != nil {
		return false, err
	}
	progress := func(status StepStatus) {
		if opts.Progress != nil {
			opts.Progress(StepState{Index: n + 1, Name: step.Name, Kind: step.Kind, Idempotent: step.IsIdempotent(), Status: status.String(),
				Attempts: []StepAttempt{{Attempt: attempt, Status: status, Result: res}}})
		}
	}
	progress(StepStarted)
	failpoint.Hit("flow:step-started")
	begin := wtx.BeginOptions{Name: stepStageName(run.ID, n, attempt), Exclude: step.Exclude, Share: step.Share,
		Protect: step.Protect, Backend: step.Backend}
	lineage := run.ForkedFrom != "" && !failpoint.Disabled("fork-at")
	st, err := w.openStepStage(ctx, run, n, begin, lineage)
	if err != nil {
		return true, w.failStep(ctx, run.ID, n, attempt, res, created, nil, err, progress)
	}
	res.StageID, res.BaseDigest = st.ID(), st.BaseDigest()
	link().SetAttempt(st, begin.Name)
	if err := w.db().SetFlowRunBase(ctx, run.ID, st.BaseDigest()); err != nil {
		return false, wtx.AsError(err)
	}
	if err := w.putStep(ctx, run.ID, n, attempt, StepStarted, res, created); err != nil {
		return false, err
	}
	failpoint.Hit("flow:stage-open")
	items, before, ok, err := w.stepItems(ctx, run, n, st, res, opts)
	if !ok {
		return true, w.failStep(ctx, run.ID, n, attempt, res, created, st, err, progress)
	}
	if err := stageAll(ctx, st, step, items); err != nil {
		return true, w.failStep(ctx, run.ID, n, attempt, res, created, st, err, progress)
	}
	failpoint.Hit("flow:staged")
	cs, err := st.Changes(ctx, nil)
	if err == nil && step.Kind == StepAgent {
		err = checkLanded(step, before, cs)
	}
	if err != nil {
		return true, w.failStep(ctx, run.ID, n, attempt, res, created, st, err, progress)
	}
	if lineage && n+1 < len(run.Steps) {
		// Keep the fork's line for its next step before this one lands.
		if err := w.dropStageNamed(ctx, lineageName(run.ID, n)); err != nil {
			return false, err
		}
		if _, err := st.Fork(ctx, wtx.ForkOptions{Name: lineageName(run.ID, n)}); err != nil {
			return true, w.failStep(ctx, run.ID, n, attempt, res, created, st, err, progress)
		}
	}
	res.ChangesetDigest, res.Counts = cs.Digest, cs.Counts
	if d := link().ResultDigest(cs); d != "" {
		// As an apply of the whole change set computes it.
		res.ResultDigest = d
	}
	switch step.OnSuccess {
	case OnSuccessReview, OnSuccessKeep:
		status := StepReview
		if step.OnSuccess == OnSuccessKeep {
			status = StepStaged
		}
		if err := w.putStep(ctx, run.ID, n, attempt, status, res, created); err != nil {
			return false, err
		}
		progress(status)
		return status == StepReview, nil
	}
	return w.applyStep(ctx, run.ID, n, attempt, st, step, res, created, progress, false)
}

// openStepStage opens the stage of step n's attempt: on the workspace, or
// on a fork's line (lineage).
func (w *runner) openStepStage(ctx context.Context, run *Run, n int, begin wtx.BeginOptions, lineage bool) (*wtx.Stage, error) {
	switch {
	case lineage && n == run.row.ForkedAt+1:
		// The first step of a fork sees the state after the fork point.
		begin.At = forkAnchor(run, run.row.ForkedAt)
		return w.ws.Begin(ctx, begin)
	case lineage:
		// A later step of a fork sees the fork's own line: the state after
		// the fork point with the fork's steps since, kept in a stage.
		from, err := w.ws.Stage(ctx, lineageName(run.ID, n-1))
		if err == nil && from.State() != wtx.StateOpen {
			err = errorf(wtx.CodeStageSettled, "the state after step %s of fork %s is gone (its stage %s is %s)", run.Steps[n-1].Name, run.ID, from.ID(), from.State())
		}
		if err == nil {
			err = checkLineageOwn(ctx, run, n, from)
		}
		if err != nil {
			return nil, err
		}
		return from.Fork(ctx, wtx.ForkOptions{Name: begin.Name})
	default:
		return w.ws.Begin(ctx, begin)
	}
}

// stepItems runs step n's command (run and agent steps) or reads its ops
// (batch steps) in st. It returns the per-file ops to stage, what st held
// before the command ran, and false when the step fails (with err, or the
// command's status when err is nil).
func (w *runner) stepItems(ctx context.Context, run *Run, n int, st *wtx.Stage, res *StepResult, opts Options) ([]wtx.BatchItem, *wtx.ChangeSet, bool, error) {
	step := &run.def.Steps[n]
	var items []wtx.BatchItem
	var before *wtx.ChangeSet
	var err error
	switch step.Kind {
	case StepRun, StepAgent:
		// What the stage holds before an agent runs (a fork's line): the
		// agent must leave it so.
		before, err = st.Changes(ctx, nil)
		if err != nil {
			return nil, nil, false, err
		}
		out, ok, err := w.runStepCommand(ctx, run, n, st, res, opts)
		if err != nil || !ok {
			return nil, nil, false, err
		}
		if step.Kind == StepAgent {
			if items, err = w.checkProposal(ctx, st, step, out, before.Digest, res); err != nil {
				return nil, nil, false, err
			}
		}
	case StepBatch:
		if step.From == FromPrevious {
			prev, err := previousOutput(run, n)
			if err != nil {
				return nil, nil, false, err
			}
			if items, err = wtx.ParseBatch(strings.NewReader(string(prev))); err != nil {
				return nil, nil, false, err
			}
		} else {
			for _, op := range step.Ops {
				it, _ := op.item() // checked when the definition was parsed
				items = append(items, it)
			}
		}
	}
	return items, before, true, nil
}

// applyStep applies the step's stage, recording the step's result with the
// op in one transaction; a stage with nothing to apply records it alone
// (there is no workspace change for it to be atomic with).
//
// A stage a step kept for review (reviewed) is never dropped when its apply
// fails: it holds the command's output and maybe a person's edits, so the
// attempt stays in review with the refusal and its repairs recorded, and
// the run stops for a decision (T-008).
func (w *runner) applyStep(ctx context.Context, run string, n, attempt int, st *wtx.Stage, step *Step, res *StepResult, created time.Time, progress func(StepStatus), reviewed bool) (bool, error) {
	rec := &flowStepRecord{RunID: run, Step: n, Attempt: attempt, Status: StepDone, StatusNum: int(StepDone), CreatedAt: created, Result: *res}
	opts := wtx.ApplyOptions{Approve: step.Approve}
	if !failpoint.Disabled("flow-atomic") {
		opts.Annotate = rec.annotate
	}
	if reviewed {
		approve, err := reviewedApproval(ctx, st, step, res)
		if err != nil {
			return false, err
		}
		opts.Approve = approve
	}
	agent := step.Kind == StepAgent
	if agent {
		// What an agent proposed lands on its own authority (T-003): never
		// a protected path, whatever the flow file says.
		link().AsAgent(&opts)
	}
	ar, err := st.Apply(ctx, opts)
	if e := wtx.AsError(err); e != nil && e.Code == wtx.CodeProtected && agent {
		err = agentProtected(step, e)
	}
	if err != nil {
		*res = rec.Result
		if reviewed && !failpoint.Disabled("flow-keep-reviewed") {
			return true, w.keepReviewed(ctx, run, n, attempt, res, created, st.OfferRebase(ctx, err), progress)
		}
		return true, w.failStep(ctx, run, n, attempt, res, created, st, err, progress)
	}
	*res = rec.Result
	if ar.OpID != "" && failpoint.Disabled("flow-atomic") {
		// Negative control: the result is recorded after the op, in a
		// transaction of its own, and a crash in between loses it.
		res.OpID, res.StageID, res.ChangesetDigest, res.Counts, res.Written = ar.OpID, st.ID(), ar.ChangesetDigest, ar.Counts, ar.Written
		failpoint.Hit("flow:applied")
		if err := w.putStep(ctx, run, n, attempt, StepDone, res, created); err != nil {
			return false, err
		}
	}
	failpoint.Hit("flow:applied")
	if ar.OpID == "" {
		res.Written = nil
		if err := w.putStep(ctx, run, n, attempt, StepDone, res, created); err != nil {
			return false, err
		}
	}
	progress(StepDone)
	return false, nil
}

// applyReviewed applies a stage a step kept for review, when it is still
// open; a dropped one makes the step run again. A refused apply keeps the
// stage and stops the run (applyStep).
func (w *runner) applyReviewed(ctx context.Context, run *Run, n int, a *StepAttempt, opts Options) (bool, error) {
	step := &run.def.Steps[n]
	st, err := w.ws.Stage(ctx, a.StageID)
	if err != nil && wtx.AsError(err).Code != wtx.CodeStageNotFound {
		return false, err
	}
	res := &StepResult{Step: step.Name, Kind: step.Kind}
	if a.Result != nil {
		res = a.Result
	}
	progress := func(status StepStatus) {
		if opts.Progress != nil {
			opts.Progress(StepState{Index: n + 1, Name: step.Name, Kind: step.Kind, Status: status.String(),
				Attempts: []StepAttempt{{Attempt: a.Attempt, Status: status, Result: res}}})
		}
	}
	switch {
	case st == nil || st.State() == wtx.StateDropped:
		return w.execStep(ctx, run, n, a.Attempt+1, opts)
	case st.State() == wtx.StateApplied || st.State() == wtx.StateEmpty:
		// Applied by hand after the review: the step is behind the run,
		// and so is the refusal of an earlier resume.
		res.Error, res.Repairs = nil, nil
		if ops, err := w.stageOps(ctx, st); err == nil && len(ops) > 0 {
			res.OpID = ops[len(ops)-1]
		}
		if err := w.putStep(ctx, run.ID, n, a.Attempt, StepDone, res, a.Created); err != nil {
			return false, err
		}
		progress(StepDone)
		return false, nil
	}
	// The refusal of an earlier resume is behind it now.
	res.Error, res.Repairs = nil, nil
	return w.applyStep(ctx, run.ID, n, a.Attempt, st, step, res, a.Created, progress, true)
}

// ops returns the ids of the ops that applied the stage, oldest first.
func (w *runner) stageOps(ctx context.Context, s *wtx.Stage) ([]string, error) {
	ops, err := w.ws.Ops(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, op := range ops {
		if op.Tx == s.ID() && op.Kind == "apply" {
			out = append(out, op.ID)
		}
	}
	return out, nil
}

// failStep drops the attempt's stage (when there is one) and records the
// attempt failed with err (or the command's status when err is nil).
func (w *runner) failStep(ctx context.Context, run string, n, attempt int, res *StepResult, created time.Time, st *wtx.Stage, err error, progress func(StepStatus)) error {
	ctx = context.WithoutCancel(ctx)
	if err != nil {
		e := wtx.AsError(err)
		res.Error = &wtx.Refusal{Code: e.Code, Message: e.Message}
	}
	if st != nil {
		if derr := st.Drop(ctx); derr != nil {
			return derr
		}
	}
	if perr := w.putStep(ctx, run, n, attempt, StepFailed, res, created); perr != nil {
		return perr
	}
	progress(StepFailed)
	return nil
}

// previousOutput is the stdout step n-1 recorded, whole.
func previousOutput(run *Run, n int) ([]byte, error) {
	a := run.Steps[n-1].latest()
	if a == nil || a.Result == nil || a.Status != StepDone && a.Status != StepStaged {
		return nil, errorf(wtx.CodeUsage, "step %s takes its ops from step %s, which has no output (it was %s)", run.Steps[n].Name, run.Steps[n-1].Name, run.Steps[n-1].Status)
	}
	r := a.Result
	if int64(len(r.Stdout)) != r.StdoutSize {
		return nil, errorf(wtx.CodeUsage, "step %s takes its ops from step %s, whose output (%d bytes) was longer than the %d it kept; raise its keep_output", run.Steps[n].Name, run.Steps[n-1].Name, r.StdoutSize, len(r.Stdout))
	}
	return r.Stdout, nil
}

// runStepCommand runs a run or agent step's command in st. It returns the
// command's stdout and whether the command succeeded.
func (w *runner) runStepCommand(ctx context.Context, run *Run, n int, st *wtx.Stage, res *StepResult, opts Options) ([]byte, bool, error) {
	step := &run.def.Steps[n]
	if err := wtx.LookCommand(w.ws.Path(), step.Command[0]); err != nil {
		return nil, false, err
	}
	stdout, stderr := newCapture(step.KeepOutput), newCapture(step.KeepOutput)
	if step.Kind == StepAgent {
		// The proposal is parsed whole: keep all of it, up to a batch.
		stdout.limit = wtx.MaxBatchLine
	}
	rctx := ctx
	if d := step.TimeoutDuration(); d > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	env := append(slices.Clip(opts.Env), "WTX_FLOW_RUN="+run.ID, "WTX_FLOW_STEP="+step.Name)
	// An agent's view is read-only on every backend, and where it cannot
	// be the step is refused (precondition.confinement); whatever it
	// changed in its view would be refused once it ends all the same
	// (checkProposal). Either way it writes nothing that lands.
	agent := step.Kind == StepAgent
	rr, err := st.Run(rctx, step.Command, wtx.RunOptions{Stdout: stdout, Stderr: stderr, Env: env,
		ReadOnly: step.ReadOnly || agent, NoNetwork: step.NoNetwork, Confine: agent})
	res.StdoutSize, res.StderrSize = stdout.size, stderr.size
	res.StdoutDigest, res.StderrDigest = stdout.digest(), stderr.digest()
	res.Stdout, res.Stderr = stdout.kept, stderr.kept
	if step.Kind == StepAgent && len(res.Stdout) > step.KeepOutput {
		res.Stdout = res.Stdout[:step.KeepOutput]
	}
	if err != nil {
		return nil, false, err
	}
	code := rr.ExitCode
	res.ExitCode, res.Signal = &code, rr.Signal
	if rr.Receipt != nil {
		res.Receipts = append(res.Receipts, rr.Receipt.ID)
		res.NotTransactional = rr.Receipt.NotTransactional
	}
	for _, e := range step.Effects {
		res.NotTransactional = append(res.NotTransactional, "declared effect: "+e)
	}
	if rctx.Err() != nil && ctx.Err() == nil {
		res.TimedOut = true
		return nil, false, errorf(wtx.CodeStepFailed, "step %s: command timed out after %s", step.Name, step.Timeout)
	}
	if ctx.Err() != nil {
		return nil, false, ctx.Err()
	}
	if code != 0 {
		return nil, false, errorf(wtx.CodeStepFailed, "step %s: command %s exited with status %d", step.Name, quote.Text(step.Command[0]), code)
	}
	return stdout.kept, true, nil
}

// checkProposal validates an agent's proposal against the step's allowlist
// before anything is staged (W-005): every op's kind, path and size, and
// that the command itself changed nothing in its (read-only) view.
func (w *runner) checkProposal(ctx context.Context, st *wtx.Stage, step *Step, out []byte, before string, res *StepResult) ([]wtx.BatchItem, error) {
	res.ProposalDigest = fmt.Sprintf("sha256:%x", sha256.Sum256(out))
	cs, err := st.Changes(ctx, nil)
	if err != nil {
		return nil, err
	}
	if cs.Digest != before && !failpoint.Disabled("proposal") {
		return nil, &wtx.Error{Code: wtx.CodeProposalRefused, Message: fmt.Sprintf("agent step %s: the command changed %d path(s) itself (first: %s); an agent only proposes", step.Name, len(cs.Changes), quote.Path(cs.Changes[0].Path))}
	}
	if len(strings.TrimSpace(string(out))) == 0 {
		res.ProposalOps = 0
		return nil, nil
	}
	items, err := wtx.ParseBatch(strings.NewReader(string(out)))
	if err != nil {
		e := wtx.AsError(err)
		return nil, &wtx.Error{Code: wtx.CodeProposalRefused, Message: "agent step " + step.Name + ": proposal: " + e.Message}
	}
	res.ProposalOps = len(items)
	if failpoint.Disabled("proposal") {
		return items, nil // negative control: the allowlist is not checked
	}
	allow := step.Allow
	sels, _ := tree.ParseSelectors(allow.Paths) // checked with the definition
	var conflicts []wtx.Conflict
	if len(items) > allow.MaxOps {
		conflicts = append(conflicts, wtx.Conflict{Path: "", Kind: "too-many-ops", Detail: fmt.Sprintf("%d ops, at most %d", len(items), allow.MaxOps)})
	}
	for i, it := range items {
		detail := fmt.Sprintf("op %d (%s)", i+1, it.Command)
		if !slices.Contains(allow.Ops, it.Command) {
			conflicts = append(conflicts, wtx.Conflict{Path: it.Path, Kind: "op-not-allowed", Detail: detail})
		}
		if link().ValidOpPath(it.Path) != nil || !sels.Match(it.Path) {
			conflicts = append(conflicts, wtx.Conflict{Path: it.Path, Kind: "path-not-allowed", Detail: detail})
		}
		var size int64
		if it.Content != nil {
			size = int64(len(*it.Content))
		}
		if it.New != nil {
			size = max(size, int64(len(*it.New)))
		}
		if size > allow.MaxBytes {
			conflicts = append(conflicts, wtx.Conflict{Path: it.Path, Kind: "too-large", Detail: fmt.Sprintf("%s: %d bytes, at most %d", detail, size, allow.MaxBytes)})
		}
	}
	if len(conflicts) > 0 {
		return nil, &wtx.Error{Code: wtx.CodeProposalRefused, Conflicts: conflicts,
			Message: fmt.Sprintf("agent step %s: %d op(s) of the proposal are outside the step's allowlist; first: %s (%s); nothing was written", step.Name, len(conflicts), quote.Path(conflicts[0].Path), conflicts[0].Kind)}
	}
	return items, nil
}

// stageAll performs step's per-file ops in st, in order; an agent's edit
// is checked against its allowlist's size before it is staged.
func stageAll(ctx context.Context, st *wtx.Stage, step *Step, items []wtx.BatchItem) error {
	for i, it := range items {
		var err error
		if step.Kind == StepAgent {
			err = checkEditSize(ctx, st, it, step.Allow.MaxBytes)
		}
		if err == nil {
			err = stageItem(ctx, st, it)
		}
		if err != nil {
			e := wtx.AsError(err)
			out := *e
			out.Message = fmt.Sprintf("op %d (%s %s): %s", i+1, it.Command, quote.Path(it.Path), e.Message)
			return &out
		}
	}
	return nil
}

// stageItem performs one batch op in st.
func stageItem(ctx context.Context, st *wtx.Stage, it wtx.BatchItem) error {
	var err error
	switch it.Command {
	case "write":
		_, err = st.Write(ctx, it.Path, []byte(*it.Content), wtx.WriteOptions{ExpectHash: it.ExpectHash})
	case "edit":
		_, err = st.Edit(ctx, it.Path, it.Old, *it.New, it.All, it.ExpectHash)
	case "rm":
		_, err = st.Remove(ctx, it.Path, it.ExpectHash)
	case "read":
		_, err = st.Read(ctx, it.Path)
	}
	return err
}
