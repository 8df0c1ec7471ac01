package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/state"
)

func flowRunError(ref string) *wtx.Error {
	return errorf(wtx.CodeRunNotFound, "no flow run %q in this workspace (see 'wtx flow list')", ref)
}

// runs is Runs.
func (w *runner) runs(ctx context.Context) ([]*Run, error) {
	rows, err := w.db().ListFlowRuns(ctx, w.id())
	if err != nil {
		return nil, wtx.AsError(err)
	}
	out := make([]*Run, 0, len(rows))
	for _, r := range rows {
		run, err := w.loadFlowRun(ctx, r)
		if err != nil {
			return nil, err
		}
		out = append(out, run)
	}
	return out, nil
}

// find is Show.
func (w *runner) find(ctx context.Context, ref string) (*Run, error) {
	if ref == "" {
		return nil, errorf(wtx.CodeUsage, "no flow run given")
	}
	row, err := w.db().GetFlowRun(ctx, ref)
	if errors.Is(err, state.ErrNotFound) {
		row, err = w.db().FlowRunByName(ctx, w.id(), ref)
	}
	if errors.Is(err, state.ErrNotFound) {
		rows, lerr := w.db().ListFlowRuns(ctx, w.id())
		if lerr != nil {
			return nil, wtx.AsError(lerr)
		}
		var found []state.FlowRun
		for _, r := range rows {
			if strings.HasPrefix(r.ID, ref) {
				found = append(found, r)
			}
		}
		switch len(found) {
		case 0:
			return nil, flowRunError(ref)
		case 1:
			row, err = found[0], nil
		default:
			return nil, errorf(wtx.CodeAmbiguousStage, "%q matches several flow runs: %s and %d more", ref, found[0].ID, len(found)-1)
		}
	}
	if err != nil {
		return nil, wtx.AsError(err)
	}
	if row.WorkspaceID != w.id() {
		return nil, flowRunError(ref)
	}
	return w.loadFlowRun(ctx, row)
}

// loadFlowRun assembles a run from its row and its steps' attempts.
func (w *runner) loadFlowRun(ctx context.Context, row state.FlowRun) (*Run, error) {
	rows, err := w.db().FlowSteps(ctx, row.ID)
	if err != nil {
		return nil, wtx.AsError(err)
	}
	run, err := assembleRun(row, rows)
	if err != nil {
		return nil, err
	}
	run.derive(w.flowRunLive(row.ID))
	return run, nil
}

// assembleRun builds a run from its row and its steps' rows; a
// definition or a step record that does not hold together is io.corrupt
// (fsck checks every run with it).
func assembleRun(row state.FlowRun, rows []state.FlowStep) (*Run, error) {
	def, err := Parse(row.Definition)
	if err != nil {
		return nil, &wtx.Error{Code: wtx.CodeCorrupt, Message: fmt.Sprintf("flow run %s: its stored definition no longer parses: %s", row.ID, wtx.AsError(err).Message)}
	}
	if def.Digest != row.DefinitionDigest {
		return nil, &wtx.Error{Code: wtx.CodeCorrupt, Message: fmt.Sprintf("flow run %s: its stored definition does not match its digest %s", row.ID, row.DefinitionDigest)}
	}
	run := &Run{ID: row.ID, Name: row.Name, FlowName: def.Name, Created: row.CreatedAt, DefinitionDigest: row.DefinitionDigest,
		BaseDigest: row.BaseDigest, ForkedFrom: row.ForkedFrom, def: def, row: row, Repairs: []wtx.Repair{}}
	if row.ForkedFrom != "" && row.ForkedAt >= 0 && row.ForkedAt < len(def.Steps) {
		run.ForkedAt = def.Steps[row.ForkedAt].Name
	}
	for i, s := range def.Steps {
		run.Steps = append(run.Steps, StepState{Index: i + 1, Name: s.Name, Kind: s.Kind, Idempotent: s.IsIdempotent(), Status: "pending", Attempts: []StepAttempt{}})
	}
	for _, r := range rows {
		if r.Step < 0 || r.Step >= len(run.Steps) {
			return nil, &wtx.Error{Code: wtx.CodeCorrupt, Message: fmt.Sprintf("flow run %s: a result for step %d, which its definition lacks", row.ID, r.Step+1)}
		}
		a := StepAttempt{Attempt: r.Attempt, Status: StepStatus(r.Status), StageID: r.StageID, OpID: r.OpID, Created: r.CreatedAt, Updated: r.UpdatedAt}
		if _, ok := stepStatusNames[a.Status]; !ok {
			return nil, &wtx.Error{Code: wtx.CodeCorrupt, Message: fmt.Sprintf("flow run %s: step %d has an unknown status %d", row.ID, r.Step+1, r.Status)}
		}
		if len(r.Result) > 0 {
			var res StepResult
			if err := json.Unmarshal(r.Result, &res); err != nil {
				return nil, &wtx.Error{Code: wtx.CodeCorrupt, Message: fmt.Sprintf("flow run %s: the result of step %d is damaged: %v", row.ID, r.Step+1, err)}
			}
			a.Result = &res
		}
		st := &run.Steps[r.Step]
		st.Attempts = append(st.Attempts, a)
		st.Status = a.Status.String()
	}
	return run, nil
}

// next returns the index of the first step without a complete result, or
// len(steps).
func (r *Run) next() int {
	for i := range r.Steps {
		if a := r.Steps[i].latest(); a == nil || !a.Status.complete() {
			return i
		}
	}
	return len(r.Steps)
}

// derive sets the run's status, next step and repairs from its steps.
func (r *Run) derive(running bool) {
	n := r.next()
	r.Next = ""
	if n < len(r.Steps) {
		r.Next = r.Steps[n].Name
	}
	ref := r.ID
	resume := wtx.Repair{Action: "resume", Detail: "go on from the first step without a result", Command: "wtx flow resume " + ref}
	skip := wtx.Repair{Action: "skip", Detail: "record the step as skipped and go on", Command: "wtx flow resume " + ref + " --skip"}
	abandon := wtx.Repair{Action: "abandon", Detail: "stop the run for good; what it applied stays", Command: "wtx flow abandon " + ref}
	r.Repairs = []wtx.Repair{}
	switch {
	case r.row.Abandoned:
		r.Status = RunAbandoned
		return
	case running:
		r.Status = RunRunning
		return
	case n == len(r.Steps):
		r.Status = RunDone
		return
	}
	a := r.Steps[n].latest()
	step := r.def.Steps[n]
	switch {
	case a == nil && n == 0:
		r.Status = RunPending
		r.Repairs = []wtx.Repair{resume}
		return
	case a == nil:
		r.Status = RunInterrupted
	case a.Status == StepFailed:
		r.Status = RunFailed
	case a.Status == StepReview && a.Result != nil && a.Result.Error != nil:
		r.Status = RunRefused
		resume.Detail = "apply it and go on, once the stage or the workspace is put right"
		r.Repairs = append(refusedReviewRepairs(a), resume, abandon)
		return
	case a.Status == StepReview:
		r.Status = RunReview
		r.Repairs = []wtx.Repair{
			{Action: "review", Detail: "look at the step's change", Command: "wtx diff " + a.StageID},
			{Action: "resume", Detail: "apply it and go on", Command: "wtx flow resume " + ref},
			{Action: "drop", Detail: "drop it; a resume then runs the step again", Command: "wtx drop " + a.StageID},
			abandon,
		}
		return
	case (a.Status == StepStarted || a.Status == StepInterrupted) && !step.IsIdempotent():
		r.Status = RunInDoubt
		r.Repairs = []wtx.Repair{
			{Action: "retry", Detail: "run the step again (its external effects may happen twice)", Command: "wtx flow resume " + ref + " --retry"},
			skip, abandon,
		}
		return
	default:
		r.Status = RunInterrupted
	}
	r.Repairs = []wtx.Repair{resume, skip, {Action: "fork", Detail: "start a new run from the state after an earlier step", Command: "wtx flow fork " + ref + " --at STEP"}, abandon}
}

// Definition returns the run's pinned definition.
func (r *Run) Definition() *Def { return r.def }

// start is Start.
func (w *runner) start(ctx context.Context, def *Def, opts Options) (*Run, error) {
	if def == nil || def.src == nil {
		return nil, errorf(wtx.CodeUsage, "no flow definition given (Parse makes one)")
	}
	data := def.src
	if opts.Name != "" {
		if !link().ValidName(opts.Name) || strings.HasPrefix(opts.Name, "run-") {
			return nil, errorf(wtx.CodeUsage, "run name %q: use 1-64 letters, digits, '.', '_' or '-', not starting with 'run-'", opts.Name)
		}
	}
	now := w.now().UTC()
	row := state.FlowRun{ID: link().NewID("run", now), WorkspaceID: w.id(), Name: opts.Name, CreatedAt: now,
		DefinitionDigest: def.Digest, Definition: append([]byte(nil), data...)}
	if err := w.db().InsertFlowRun(ctx, row); err != nil {
		if errors.Is(err, state.ErrExists) && opts.Name != "" {
			return nil, errorf(wtx.CodeNameTaken, "a flow run of this workspace is already named %q", opts.Name)
		}
		return nil, wtx.AsError(err)
	}
	failpoint.Hit("flow:created")
	return w.continueFlow(ctx, row.ID, opts)
}

// resume is Resume.
func (w *runner) resume(ctx context.Context, ref string, opts Options) (*Run, error) {
	run, err := w.find(ctx, ref)
	if err != nil {
		return nil, err
	}
	return w.continueFlow(ctx, run.ID, opts)
}

// abandon is Abandon.
func (w *runner) abandon(ctx context.Context, ref string) (*Run, error) {
	run, err := w.find(ctx, ref)
	if err != nil {
		return nil, err
	}
	release, err := w.lockFlowRun(run.ID)
	if err != nil {
		return nil, err
	}
	defer release()
	for i := range run.Steps {
		if a := run.Steps[i].latest(); a != nil && a.Status == StepReview {
			if err := w.checkReviewUntouched(ctx, run, i, a, "abandoning the run"); err != nil {
				return nil, err
			}
		}
	}
	for i := range run.Steps {
		a := run.Steps[i].latest()
		switch {
		case a != nil && a.Status == StepReview:
			if err := w.dropReviewed(ctx, run, i, a, "abandoning the run"); err != nil {
				return nil, err
			}
		case a != nil && a.Status == StepStarted:
			if err := w.dropStepStageChecked(ctx, run.ID, i, a, func(st *wtx.Stage) error { return checkFlowOnly(ctx, run, i, st) }); err != nil {
				return nil, err
			}
		}
	}
	if err := w.db().AbandonFlowRun(ctx, run.ID); err != nil {
		return nil, wtx.AsError(err)
	}
	return w.find(ctx, run.ID)
}

// lockFlowRun takes the run's lock, without waiting: one process executes
// a run at a time. A killed holder leaves no stale lock (flock).
func (w *runner) lockFlowRun(id string) (func(), error) {
	dir := filepath.Join(w.stateDir(), "flows")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, wtx.AsError(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, id+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, wtx.AsError(fmt.Errorf("open lock of flow run %s: %w", id, err))
	}
	// A reader (flowRunLive) holds the lock shared for an instant: a
	// short wait tells it from a process executing the run.
	for deadline := time.Now().Add(250 * time.Millisecond); ; {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EWOULDBLOCK) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		break
	}
	if err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &wtx.Error{Code: wtx.CodeLocked, Message: fmt.Sprintf("flow run %s is being executed by another wtx process; nothing was done", id),
				Repairs: []wtx.Repair{{Action: "wait", Detail: "wait for it to finish, then look at the run", Command: "wtx flow show " + id}}}
		}
		return nil, wtx.AsError(fmt.Errorf("lock flow run %s: %w", id, err))
	}
	return func() { f.Close() }, nil
}

// flowRunLive reports whether a process holds the run's lock: it executes
// the run now. It only reads (a run never executed has no lock file).
func (w *runner) flowRunLive(id string) bool {
	f, err := os.Open(filepath.Join(w.stateDir(), "flows", id+".lock"))
	if err != nil {
		return false
	}
	defer f.Close()
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	return errors.Is(err, unix.EWOULDBLOCK)
}

// stepStageName names the stage of a step attempt, so that a resume finds
// a stage whose id was never recorded.
func stepStageName(run string, step, attempt int) string {
	return fmt.Sprintf("flow.%s.%d.%d", strings.TrimPrefix(run, "run-"), step+1, attempt)
}

// dropStepStage drops the open stage an attempt left, waiting a little for
// a killed run's supervisor to end.
func (w *runner) dropStepStage(ctx context.Context, run string, step int, a *StepAttempt) error {
	return w.dropStepStageChecked(ctx, run, step, a, nil)
}

// dropStepStageChecked is dropStepStage, refused when check, asked under
// the stage's locks, fails.
func (w *runner) dropStepStageChecked(ctx context.Context, run string, step int, a *StepAttempt, check func(*wtx.Stage) error) error {
	ref := a.StageID
	if ref == "" {
		ref = stepStageName(run, step, a.Attempt)
	}
	st, err := w.ws.Stage(ctx, ref)
	if err != nil {
		if e := wtx.AsError(err); e.Code == wtx.CodeStageNotFound {
			return nil
		}
		return err
	}
	if st.State() != wtx.StateOpen {
		return nil
	}
	if err := link().AuthorizeDrop(w.ws); err != nil {
		return err
	}
	var under func() error
	if check != nil {
		under = func() error { return check(st) }
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := link().DropChecked(ctx, st, under)
		if err == nil {
			return nil
		}
		if wtx.AsError(err).Code != wtx.CodeStageBusy || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// fork is Fork.
func (w *runner) fork(ctx context.Context, ref, at string, opts Options) (*Run, error) {
	orig, err := w.find(ctx, ref)
	if err != nil {
		return nil, err
	}
	k := -1
	for i, s := range orig.Steps {
		if s.Name == at || fmt.Sprint(i+1) == at {
			k = i
		}
	}
	if k < 0 {
		return nil, errorf(wtx.CodeUsage, "flow run %s has no step %q", orig.ID, at)
	}
	for i := 0; i <= k; i++ {
		if a := orig.Steps[i].latest(); a == nil || !a.Status.complete() {
			return nil, errorf(wtx.CodeUsage, "step %s of %s has no result (%s); fork at a step the run has behind it", orig.Steps[i].Name, orig.ID, orig.Steps[i].Status)
		}
	}
	if forkAnchor(orig, k) == "" {
		return nil, errorf(wtx.CodeUsage, "the steps of %s up to %s applied nothing: there is no state to fork from; start a new run", orig.ID, orig.Steps[k].Name)
	}
	if opts.Name != "" && (!link().ValidName(opts.Name) || strings.HasPrefix(opts.Name, "run-")) {
		return nil, errorf(wtx.CodeUsage, "run name %q: use 1-64 letters, digits, '.', '_' or '-', not starting with 'run-'", opts.Name)
	}
	now := w.now().UTC()
	row := state.FlowRun{ID: link().NewID("run", now), WorkspaceID: w.id(), Name: opts.Name, CreatedAt: now,
		DefinitionDigest: orig.DefinitionDigest, Definition: orig.row.Definition, ForkedFrom: orig.ID, ForkedAt: k}
	err = w.db().Tx(ctx, func(tx *state.Txn) error {
		if err := tx.InsertFlowRun(ctx, row); err != nil {
			return err
		}
		for i := 0; i <= k; i++ {
			a := orig.Steps[i].latest()
			rec := flowStepRecord{RunID: row.ID, Step: i, Attempt: 1, Status: a.Status, CreatedAt: a.Created}
			if a.Result != nil {
				rec.Result = *a.Result
			}
			r, err := rec.row(a.Updated)
			if err != nil {
				return err
			}
			if err := tx.PutFlowStep(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, state.ErrExists) && opts.Name != "" {
			return nil, errorf(wtx.CodeNameTaken, "a flow run of this workspace is already named %q", opts.Name)
		}
		return nil, wtx.AsError(err)
	}
	return w.continueFlow(ctx, row.ID, opts)
}

// forkAnchor is the last op the steps up to k recorded ("" if none).
func forkAnchor(run *Run, k int) string {
	for i := k; i >= 0; i-- {
		if a := run.Steps[i].latest(); a != nil && a.Result != nil && a.Result.OpID != "" {
			return a.Result.OpID
		}
	}
	return ""
}
