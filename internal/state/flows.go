package state

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// A FlowRun is one run of a flow definition over a workspace. Definition
// holds the definition's bytes as they were read, DefinitionDigest their
// digest: a run is pinned to what it started with.
type FlowRun struct {
	ID               string
	WorkspaceID      string
	Name             string // "" when the run has no name
	CreatedAt        time.Time
	DefinitionDigest string
	Definition       []byte
	BaseDigest       string // the workspace's digest when the run started; "" until known
	ForkedFrom       string // "" unless the run was forked
	ForkedAt         int    // the step index after which it was forked
	Abandoned        bool
}

// A FlowStep is one attempt of one step of a run. Status is a persisted
// number (see the flow code's StepStatus); Result is its JSON record.
type FlowStep struct {
	RunID     string
	Step      int
	Attempt   int
	Status    int
	StageID   string
	OpID      string
	CreatedAt time.Time
	UpdatedAt time.Time
	Result    json.RawMessage
}

// InsertFlowRun records a new run. A name taken by another run of the same
// workspace, or an id already recorded, gives an error wrapping [ErrExists].
func (q *queries) InsertFlowRun(ctx context.Context, r FlowRun) error {
	if r.ID == "" || r.WorkspaceID == "" || r.DefinitionDigest == "" {
		return fmt.Errorf("insert flow run %s: id, workspace and definition digest are required", r.ID)
	}
	var forkedAt any
	if r.ForkedFrom != "" {
		forkedAt = r.ForkedAt
	}
	_, err := q.q.ExecContext(ctx, `INSERT INTO flow_runs (id, workspace_id, name, created_at, definition_digest,
		definition, base_digest, forked_from, forked_at, abandoned) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0)`,
		r.ID, r.WorkspaceID, nullable(r.Name), formatTime(r.CreatedAt), r.DefinitionDigest, r.Definition,
		nullable(r.BaseDigest), nullable(r.ForkedFrom), forkedAt)
	if err != nil {
		return fmt.Errorf("insert flow run %s: %w", r.ID, classify(err))
	}
	return nil
}

// SetFlowRunBase records the run's base digest unless it has one.
func (q *queries) SetFlowRunBase(ctx context.Context, id, digest string) error {
	_, err := q.q.ExecContext(ctx, "UPDATE flow_runs SET base_digest = ? WHERE id = ? AND base_digest IS NULL", digest, id)
	if err != nil {
		return fmt.Errorf("set base of flow run %s: %w", id, classify(err))
	}
	return nil
}

// AbandonFlowRun marks the run abandoned.
func (q *queries) AbandonFlowRun(ctx context.Context, id string) error {
	res, err := q.q.ExecContext(ctx, "UPDATE flow_runs SET abandoned = 1 WHERE id = ?", id)
	if err != nil {
		return fmt.Errorf("abandon flow run %s: %w", id, classify(err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("abandon flow run %s: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("abandon flow run %s: %w", id, ErrNotFound)
	}
	return nil
}

const flowRunColumns = "id, workspace_id, name, created_at, definition_digest, definition, base_digest, forked_from, forked_at, abandoned"

func scanFlowRun(r rowScanner) (FlowRun, error) {
	var f FlowRun
	var name, base, from sql.NullString
	var at sql.NullInt64
	var created string
	var abandoned int
	if err := r.Scan(&f.ID, &f.WorkspaceID, &name, &created, &f.DefinitionDigest, &f.Definition, &base, &from, &at, &abandoned); err != nil {
		return FlowRun{}, err
	}
	f.Name, f.BaseDigest, f.ForkedFrom, f.ForkedAt, f.Abandoned = name.String, base.String, from.String, int(at.Int64), abandoned == 1
	var err error
	if f.CreatedAt, err = parseTime(created); err != nil {
		return FlowRun{}, err
	}
	return f, nil
}

// GetFlowRun returns the run with id. If there is none, the error wraps
// [ErrNotFound].
func (q *queries) GetFlowRun(ctx context.Context, id string) (FlowRun, error) {
	f, err := scanFlowRun(q.q.QueryRowContext(ctx, "SELECT "+flowRunColumns+" FROM flow_runs WHERE id = ?", id))
	if err != nil {
		return FlowRun{}, fmt.Errorf("get flow run %s: %w", id, notFound(err))
	}
	return f, nil
}

// FlowRunByName returns the workspace's run named name. If there is none,
// the error wraps [ErrNotFound].
func (q *queries) FlowRunByName(ctx context.Context, workspaceID, name string) (FlowRun, error) {
	f, err := scanFlowRun(q.q.QueryRowContext(ctx, "SELECT "+flowRunColumns+" FROM flow_runs WHERE workspace_id = ? AND name = ?", workspaceID, name))
	if err != nil {
		return FlowRun{}, fmt.Errorf("get flow run %q: %w", name, notFound(err))
	}
	return f, nil
}

// ListFlowRuns returns the workspace's runs, oldest first.
func (q *queries) ListFlowRuns(ctx context.Context, workspaceID string) ([]FlowRun, error) {
	rows, err := q.q.QueryContext(ctx, "SELECT "+flowRunColumns+" FROM flow_runs WHERE workspace_id = ? ORDER BY created_at, id", workspaceID)
	if err != nil {
		return nil, fmt.Errorf("list flow runs of %s: %w", workspaceID, classify(err))
	}
	return collect(rows, scanFlowRun)
}

// PutFlowStep inserts the step attempt, or replaces the one recorded with
// the same run, step and attempt.
func (q *queries) PutFlowStep(ctx context.Context, s FlowStep) error {
	if s.RunID == "" || s.Attempt <= 0 || s.Step < 0 || s.Status <= 0 {
		return fmt.Errorf("put flow step %s/%d: run, step, attempt and status are required", s.RunID, s.Step)
	}
	result, err := jsonArg("result", s.Result)
	if err != nil {
		return fmt.Errorf("put flow step %s/%d: %w", s.RunID, s.Step, err)
	}
	if s.UpdatedAt.IsZero() {
		s.UpdatedAt = s.CreatedAt
	}
	_, err = q.q.ExecContext(ctx, `INSERT INTO flow_steps (run_id, step, attempt, status, stage_id, op_id, created_at, updated_at, result)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (run_id, step, attempt) DO UPDATE SET status = excluded.status, stage_id = excluded.stage_id,
			op_id = excluded.op_id, updated_at = excluded.updated_at, result = excluded.result`,
		s.RunID, s.Step, s.Attempt, s.Status, nullable(s.StageID), nullable(s.OpID), formatTime(s.CreatedAt), formatTime(s.UpdatedAt), result)
	if err != nil {
		return fmt.Errorf("put flow step %s/%d: %w", s.RunID, s.Step, classify(err))
	}
	return nil
}

func scanFlowStep(r rowScanner) (FlowStep, error) {
	var s FlowStep
	var stage, op, result sql.NullString
	var created, updated string
	if err := r.Scan(&s.RunID, &s.Step, &s.Attempt, &s.Status, &stage, &op, &created, &updated, &result); err != nil {
		return FlowStep{}, err
	}
	s.StageID, s.OpID, s.Result = stage.String, op.String, jsonValue(result)
	var err error
	if s.CreatedAt, err = parseTime(created); err != nil {
		return FlowStep{}, err
	}
	if s.UpdatedAt, err = parseTime(updated); err != nil {
		return FlowStep{}, err
	}
	return s, nil
}

// FlowSteps returns every attempt of every step of the run, by step then
// attempt.
func (q *queries) FlowSteps(ctx context.Context, runID string) ([]FlowStep, error) {
	rows, err := q.q.QueryContext(ctx, `SELECT run_id, step, attempt, status, stage_id, op_id, created_at, updated_at, result
		FROM flow_steps WHERE run_id = ? ORDER BY step, attempt`, runID)
	if err != nil {
		return nil, fmt.Errorf("flow steps of %s: %w", runID, classify(err))
	}
	return collect(rows, scanFlowStep)
}
