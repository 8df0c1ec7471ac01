package flow

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/wtx-dev/wtx"
	"hash"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/jsonname"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/state"
	"github.com/wtx-dev/wtx/internal/tree"
)

// StepStatus is the state of one attempt of a flow step.
type StepStatus int

// Step attempt states. persisted: the numbers are stored in flow_steps.
const (
	// StepStarted: the attempt began and has no result yet; found later, it
	// was interrupted.
	StepStarted StepStatus = 1 // persisted
	// StepDone: the step's change was applied (or it changed nothing); its
	// result is recorded with its op.
	StepDone StepStatus = 2 // persisted
	// StepFailed: the command failed, timed out, or its change or proposal
	// was refused; nothing was applied.
	StepFailed StepStatus = 3 // persisted
	// StepInterrupted: an attempt found started by a later resume.
	StepInterrupted StepStatus = 4 // persisted
	// StepSkipped: a person chose to go on without the step.
	StepSkipped StepStatus = 5 // persisted
	// StepReview: the command succeeded and its stage waits for review.
	StepReview StepStatus = 6 // persisted
	// StepStaged: the command succeeded and its stage stays open, not
	// applied; the run went on.
	StepStaged StepStatus = 7 // persisted
)

var stepStatusNames = map[StepStatus]string{StepStarted: "started", StepDone: "done", StepFailed: "failed",
	StepInterrupted: "interrupted", StepSkipped: "skipped", StepReview: "review", StepStaged: "staged"}

func (s StepStatus) String() string {
	if n, ok := stepStatusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("unknown(%d)", int(s))
}

// MarshalJSON writes the status by name.
func (s StepStatus) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// complete says whether a step whose latest attempt has this status is
// behind the run: a resume never runs it again.
func (s StepStatus) complete() bool { return s == StepDone || s == StepSkipped || s == StepStaged }

// RunStatus is where a flow run stands, derived from its steps' attempts.
type RunStatus string

// Run states.
const (
	RunPending     RunStatus = "pending"     // no step has run yet
	RunRunning     RunStatus = "running"     // a wtx process executes it now
	RunDone        RunStatus = "done"        // every step is behind it
	RunFailed      RunStatus = "failed"      // a step failed; nothing of it was applied
	RunReview      RunStatus = "review"      // a step's stage waits for review
	RunRefused     RunStatus = "refused"     // a reviewed step's apply was refused; its stage is kept: a person decides (T-008)
	RunInterrupted RunStatus = "interrupted" // a step was interrupted; resume runs it again
	RunInDoubt     RunStatus = "in-doubt"    // a step with external effects was interrupted: a person decides
	RunAbandoned   RunStatus = "abandoned"
)

// StepResult is what a step attempt leaves: recorded with the step's op in
// the same transaction (W-001), or alone when the step applied nothing.
type StepResult struct {
	Step             string     `json:"step"`
	Kind             StepKind   `json:"kind"`
	Command          []string   `json:"command,omitempty"`
	ExitCode         *int       `json:"exit_code,omitempty"`
	Signal           string     `json:"signal,omitempty"`
	TimedOut         bool       `json:"timed_out,omitempty"`
	Stdout           []byte     `json:"-"` // the kept part
	Stderr           []byte     `json:"-"`
	StdoutSize       int64      `json:"stdout_size"`
	StderrSize       int64      `json:"stderr_size"`
	StdoutDigest     string     `json:"stdout_digest,omitempty"`
	StderrDigest     string     `json:"stderr_digest,omitempty"`
	BaseDigest       string     `json:"base_digest,omitempty"`
	ChangesetDigest  string     `json:"changeset_digest,omitempty"`
	ResultDigest     string     `json:"result_digest,omitempty"`
	Counts           wtx.Counts `json:"counts"`
	Written          []string   `json:"-"`
	StageID          string     `json:"stage_id,omitempty"`
	OpID             string     `json:"op_id,omitempty"`
	Receipts         []string   `json:"receipts,omitempty"`
	NotTransactional []string   `json:"not_transactional,omitempty"`
	Effects          []string   `json:"effects,omitempty"`
	// ProposalDigest and ProposalOps describe an agent's proposal.
	ProposalDigest string       `json:"proposal_digest,omitempty"`
	ProposalOps    int          `json:"proposal_ops,omitempty"`
	Error          *wtx.Refusal `json:"error,omitempty"`
	// Repairs, for a step kept for review whose apply a resume found
	// refused, are the ways on the refusal offered (its stage is kept).
	Repairs []wtx.Repair `json:"repairs,omitempty"`
}

// flowStepRecord is a step attempt's row as it travels in an op record.
type flowStepRecord struct {
	RunID     string     `json:"run_id"`
	Step      int        `json:"step"`
	Attempt   int        `json:"attempt"`
	Status    StepStatus `json:"-"`
	StatusNum int        `json:"status"` // persisted: Status's number
	CreatedAt time.Time  `json:"created_at"`
	Result    StepResult `json:"result"`
}

func (r *flowStepRecord) row(now time.Time) (state.FlowStep, error) {
	if r.StatusNum != 0 {
		r.Status = StepStatus(r.StatusNum) // read back from a journal
	}
	body, err := json.Marshal(r.Result)
	if err != nil {
		return state.FlowStep{}, err
	}
	return state.FlowStep{RunID: r.RunID, Step: r.Step, Attempt: r.Attempt, Status: int(r.Status), StageID: r.Result.StageID,
		OpID: r.Result.OpID, CreatedAt: r.CreatedAt, UpdatedAt: now, Result: body}, nil
}

// annotate completes the record with what the apply knows of the step's
// op: it travels in the op's journal and is recorded with the op, in the
// same transaction (W-001).
func (r *flowStepRecord) annotate(op wtx.AppliedOp) (*wtx.Annotation, error) {
	r.Result.OpID, r.Result.StageID = op.OpID, op.Stage
	r.Result.Written = append([]string(nil), op.Written...)
	r.Result.ChangesetDigest, r.Result.Counts, r.Result.ResultDigest = op.ChangesetDigest, op.Counts, op.ResultDigest
	r.Result.Receipts = append(r.Result.Receipts, op.Receipt)
	if len(r.Result.NotTransactional) == 0 {
		r.Result.NotTransactional = op.NotTransactional
	}
	data, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return &wtx.Annotation{Kind: wtx.FlowStepAnnotation, Data: data}, nil
}

// StepAttempt is one attempt of a step as recorded.
type StepAttempt struct {
	Attempt int         `json:"attempt"`
	Status  StepStatus  `json:"status"`
	StageID string      `json:"stage_id,omitempty"`
	OpID    string      `json:"op_id,omitempty"`
	Created time.Time   `json:"created"`
	Updated time.Time   `json:"updated"`
	Result  *StepResult `json:"result,omitempty"`
}

// StepState is one step of a run: its definition's name and kind, and its
// attempts, oldest first.
type StepState struct {
	Index      int           `json:"index"` // from 1
	Name       string        `json:"name"`
	Kind       StepKind      `json:"kind"`
	Idempotent bool          `json:"idempotent"`
	Status     string        `json:"status"` // the latest attempt's, or "pending"
	Attempts   []StepAttempt `json:"attempts"`
}

// latest returns the step's latest attempt, or nil.
func (s *StepState) latest() *StepAttempt {
	if len(s.Attempts) == 0 {
		return nil
	}
	return &s.Attempts[len(s.Attempts)-1]
}

// Run is a run of a flow as recorded.
type Run struct {
	ID               string      `json:"id"`
	Name             string      `json:"name,omitempty"`
	FlowName         string      `json:"flow_name,omitempty"`
	Created          time.Time   `json:"created"`
	DefinitionDigest string      `json:"definition_digest"`
	BaseDigest       string      `json:"base_digest,omitempty"`
	ForkedFrom       string      `json:"forked_from,omitempty"`
	ForkedAt         string      `json:"forked_at,omitempty"`
	Status           RunStatus   `json:"status"`
	Steps            []StepState `json:"steps"`
	// Next names the step a resume would run ("" when none).
	Next string `json:"next,omitempty"`
	// Repairs are the ways on from a stopped run.
	Repairs []wtx.Repair `json:"repairs"`

	def *Def
	row state.FlowRun
}

// Options configure a flow run or resume.
type Options struct {
	// Name is an optional name for a new run, unique among the
	// workspace's runs.
	Name string
	// Env is the steps' commands' environment (wtx adds WTX_FLOW_RUN and
	// WTX_FLOW_STEP: a key that stays the same across attempts).
	Env []string
	// Retry, on resume, runs again a step with external effects that was
	// interrupted (its effects may then happen twice).
	Retry bool
	// Skip, on resume, records the first step without a result as skipped
	// and goes on with the next.
	Skip bool
	// Progress, if set, is told each step as it starts and ends.
	Progress func(step StepState)
}

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
		// Negative control: a resume runs every step again, like a CI
		// re-run of the whole job.
		for n := 0; n < run.next(); n++ {
			a := run.Steps[n].latest()
			if _, err := w.execStep(ctx, run, n, a.Attempt+1, opts); err != nil {
				return nil, err
			}
		}
		if run, err = w.find(ctx, id); err != nil {
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
	var st *wtx.Stage
	switch {
	case lineage && n == run.row.ForkedAt+1:
		// The first step of a fork sees the state after the fork point.
		begin.At = forkAnchor(run, run.row.ForkedAt)
		st, err = w.ws.Begin(ctx, begin)
	case lineage:
		// A later step of a fork sees the fork's own line: the state after
		// the fork point with the fork's steps since, kept in a stage.
		var from *wtx.Stage
		if from, err = w.ws.Stage(ctx, lineageName(run.ID, n-1)); err == nil && from.State() != wtx.StateOpen {
			err = errorf(wtx.CodeStageSettled, "the state after step %s of fork %s is gone (its stage %s is %s)", run.Steps[n-1].Name, run.ID, from.ID(), from.State())
		}
		if err == nil {
			err = checkLineageOwn(ctx, run, n, from)
		}
		if err == nil {
			st, err = from.Fork(ctx, wtx.ForkOptions{Name: begin.Name})
		}
	default:
		st, err = w.ws.Begin(ctx, begin)
	}
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
	var items []wtx.BatchItem
	var before *wtx.ChangeSet
	switch step.Kind {
	case StepRun, StepAgent:
		// What the stage holds before an agent runs (a fork's line): the
		// agent must leave it so.
		before, err = st.Changes(ctx, nil)
		if err != nil {
			return true, w.failStep(ctx, run.ID, n, attempt, res, created, st, err, progress)
		}
		out, ok, err := w.runStepCommand(ctx, run, n, st, res, opts)
		if err != nil || !ok {
			return true, w.failStep(ctx, run.ID, n, attempt, res, created, st, err, progress)
		}
		if step.Kind == StepAgent {
			if items, err = w.checkProposal(ctx, st, step, out, before.Digest, res); err != nil {
				return true, w.failStep(ctx, run.ID, n, attempt, res, created, st, err, progress)
			}
		}
	case StepBatch:
		if step.From == FromPrevious {
			prev, err := previousOutput(run, n)
			if err != nil {
				return true, w.failStep(ctx, run.ID, n, attempt, res, created, st, err, progress)
			}
			if items, err = wtx.ParseBatch(strings.NewReader(string(prev))); err != nil {
				return true, w.failStep(ctx, run.ID, n, attempt, res, created, st, err, progress)
			}
		} else {
			for _, op := range step.Ops {
				it, _ := op.item() // checked when the definition was parsed
				items = append(items, it)
			}
		}
	}
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
			return true, w.failStep(ctx, run.ID, n, attempt, res, created, st, &out, progress)
		}
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

// stepResultJSON is StepResult as JSON: output and names that are not
// UTF-8 travel in base64 beside their text, so none is lost.
type stepResultJSON struct {
	stepResultFields
	Stdout     string   `json:"stdout"`
	StdoutB64  string   `json:"stdout_b64,omitempty"`
	Stderr     string   `json:"stderr"`
	StderrB64  string   `json:"stderr_b64,omitempty"`
	Written    []string `json:"written,omitempty"`
	WrittenB64 []string `json:"written_b64,omitempty"`
}

// stepResultFields is StepResult without its methods.
type stepResultFields StepResult

// MarshalJSON writes the result with byte-safe output and names.
func (r StepResult) MarshalJSON() ([]byte, error) {
	j := stepResultJSON{stepResultFields: stepResultFields(r),
		Stdout: jsonname.Text(string(r.Stdout)), StdoutB64: jsonname.B64(string(r.Stdout)),
		Stderr: jsonname.Text(string(r.Stderr)), StderrB64: jsonname.B64(string(r.Stderr)),
		Written: jsonname.Texts(r.Written), WrittenB64: jsonname.B64s(r.Written)}
	j.stepResultFields.Stdout, j.stepResultFields.Stderr, j.stepResultFields.Written = nil, nil, nil
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (r *StepResult) UnmarshalJSON(data []byte) error {
	var j stepResultJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	out, err := jsonname.Name(j.Stdout, j.StdoutB64)
	if err != nil {
		return err
	}
	errOut, err := jsonname.Name(j.Stderr, j.StderrB64)
	if err != nil {
		return err
	}
	written, err := jsonname.Names(j.Written, j.WrittenB64)
	if err != nil {
		return err
	}
	*r = StepResult(j.stepResultFields)
	r.Stdout, r.Stderr, r.Written = []byte(out), []byte(errOut), written
	return nil
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
