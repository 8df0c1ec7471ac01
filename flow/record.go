package flow

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/jsonname"
	"github.com/wtx-dev/wtx/internal/state"
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
