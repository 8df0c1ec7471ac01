package state

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Stage states.
const (
	StageOpen    = "open"
	StageApplied = "applied"
	StageDropped = "dropped"
	StageEmpty   = "empty" // settled with an empty change set
)

// Op kinds.
const (
	OpApply = "apply"
	OpUndo  = "undo"
)

// Receipt kinds.
const (
	ReceiptRun   = "run"
	ReceiptApply = "apply"
	ReceiptUndo  = "undo"
)

// A Workspace is a directory wtx manages.
type Workspace struct {
	ID        string
	Path      string // canonical absolute path
	CreatedAt time.Time
}

// A Stage is the record of one transaction over a workspace.
type Stage struct {
	ID          string
	WorkspaceID string
	Name        string // "" when the stage has no name
	Backend     string
	State       string // StageOpen, StageApplied, StageDropped or StageEmpty
	BaseDigest  string // "" until known
	Config      json.RawMessage
	CreatedAt   time.Time
	UpdatedAt   time.Time // defaults to CreatedAt on insert
}

// An Op is one applied batch in a workspace's journal.
type Op struct {
	ID          string
	WorkspaceID string
	StageID     string // "" when the op belongs to no stage
	Kind        string // OpApply or OpUndo
	State       string
	Body        json.RawMessage
	CreatedAt   time.Time
}

// A Receipt is the durable record of a run or an apply.
type Receipt struct {
	ID          string
	Kind        string // ReceiptRun, ReceiptApply or ReceiptUndo
	WorkspaceID string
	StageID     string
	OpID        string // "" when no op was applied
	Body        json.RawMessage
	CreatedAt   time.Time
}

// querier is what *sql.DB and *sql.Tx have in common.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// queries holds the record methods shared by [DB] and [Txn].
type queries struct {
	q querier
}

// timeLayout is RFC 3339 with a fixed nine-digit fraction, so that text
// order is time order (time.RFC3339Nano drops trailing zeros).
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("stored time %q: %w", s, err)
	}
	return t.UTC(), nil
}

// nullable maps "" to SQL NULL.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// jsonArg maps an empty document to SQL NULL and refuses invalid JSON.
func jsonArg(field string, b json.RawMessage) (any, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("%s is not valid JSON", field)
	}
	return string(b), nil
}

func jsonValue(s sql.NullString) json.RawMessage {
	if !s.Valid {
		return nil
	}
	return json.RawMessage(s.String)
}

// notFound turns sql.ErrNoRows into ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	return classify(err)
}

// EnsureWorkspace returns the workspace recorded for path, recording it
// with id and now as its creation time if there is none. If path is new but
// id already names another path, the error wraps [ErrExists].
func (q *queries) EnsureWorkspace(ctx context.Context, id, path string, now time.Time) (Workspace, error) {
	if id == "" || path == "" {
		return Workspace{}, fmt.Errorf("ensure workspace %s: id and path are required", path)
	}
	_, err := q.q.ExecContext(ctx,
		"INSERT INTO workspaces (id, path, created_at) VALUES (?, ?, ?) ON CONFLICT (path) DO NOTHING",
		id, path, formatTime(now))
	if err != nil {
		return Workspace{}, fmt.Errorf("ensure workspace %s: %w", path, classify(err))
	}
	var w Workspace
	var created string
	err = q.q.QueryRowContext(ctx, "SELECT id, path, created_at FROM workspaces WHERE path = ?", path).
		Scan(&w.ID, &w.Path, &created)
	if err != nil {
		return Workspace{}, fmt.Errorf("ensure workspace %s: %w", path, notFound(err))
	}
	if w.CreatedAt, err = parseTime(created); err != nil {
		return Workspace{}, fmt.Errorf("ensure workspace %s: %w", path, err)
	}
	return w, nil
}

// checkStage validates the fields the schema cannot explain well.
func checkStage(s Stage) error {
	switch {
	case s.ID == "":
		return errors.New("stage id is required")
	case s.WorkspaceID == "":
		return errors.New("workspace id is required")
	case s.CreatedAt.IsZero():
		return errors.New("created time is required")
	}
	switch s.State {
	case StageOpen, StageApplied, StageDropped, StageEmpty:
	default:
		return fmt.Errorf("unknown stage state %q", s.State)
	}
	return nil
}

// InsertStage records a new stage. If s.Name is already the name of an open
// stage of the same workspace, the error wraps [ErrNameTaken]; if s.ID is
// already recorded, it wraps [ErrExists].
func (q *queries) InsertStage(ctx context.Context, s Stage) error {
	if err := checkStage(s); err != nil {
		return fmt.Errorf("insert stage %s: %w", s.ID, err)
	}
	cfg, err := jsonArg("config", s.Config)
	if err != nil {
		return fmt.Errorf("insert stage %s: %w", s.ID, err)
	}
	updated := s.UpdatedAt
	if updated.IsZero() {
		updated = s.CreatedAt
	}
	_, err = q.q.ExecContext(ctx, `INSERT INTO stages
		(id, workspace_id, name, created_at, updated_at, backend, state, config, base_digest)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		s.ID, s.WorkspaceID, nullable(s.Name), formatTime(s.CreatedAt), formatTime(updated),
		s.Backend, s.State, cfg, nullable(s.BaseDigest))
	if err != nil {
		return fmt.Errorf("insert stage %s: %w", s.ID, stageErr(s, classify(err)))
	}
	return nil
}

// UpdateStage stores s's name, state, base digest, config and update time
// over the recorded stage with s.ID. If the stage is not recorded, the error
// wraps [ErrNotFound]; if the name is taken, [ErrNameTaken].
func (q *queries) UpdateStage(ctx context.Context, s Stage) error {
	switch s.State {
	case StageOpen, StageApplied, StageDropped, StageEmpty:
	default:
		return fmt.Errorf("update stage %s: unknown stage state %q", s.ID, s.State)
	}
	if s.UpdatedAt.IsZero() {
		return fmt.Errorf("update stage %s: update time is required", s.ID)
	}
	cfg, err := jsonArg("config", s.Config)
	if err != nil {
		return fmt.Errorf("update stage %s: %w", s.ID, err)
	}
	res, err := q.q.ExecContext(ctx,
		"UPDATE stages SET name = ?, state = ?, base_digest = ?, config = ?, updated_at = ? WHERE id = ?",
		nullable(s.Name), s.State, nullable(s.BaseDigest), cfg, formatTime(s.UpdatedAt), s.ID)
	if err != nil {
		return fmt.Errorf("update stage %s: %w", s.ID, stageErr(s, classify(err)))
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("update stage %s: %w", s.ID, err)
	} else if n == 0 {
		return fmt.Errorf("update stage %s: %w", s.ID, ErrNotFound)
	}
	return nil
}

// stageErr states the name when err says it is taken.
func stageErr(s Stage, err error) error {
	if errors.Is(err, ErrNameTaken) {
		return fmt.Errorf("name %q: %w", s.Name, ErrNameTaken)
	}
	return err
}

const stageColumns = "id, workspace_id, name, created_at, updated_at, backend, state, config, base_digest"

// rowScanner is what *sql.Row and *sql.Rows have in common.
type rowScanner interface {
	Scan(dest ...any) error
}

func scanStage(r rowScanner) (Stage, error) {
	var s Stage
	var name, cfg, base sql.NullString
	var created, updated string
	if err := r.Scan(&s.ID, &s.WorkspaceID, &name, &created, &updated, &s.Backend, &s.State, &cfg, &base); err != nil {
		return Stage{}, err
	}
	s.Name, s.BaseDigest, s.Config = name.String, base.String, jsonValue(cfg)
	var err error
	if s.CreatedAt, err = parseTime(created); err != nil {
		return Stage{}, err
	}
	if s.UpdatedAt, err = parseTime(updated); err != nil {
		return Stage{}, err
	}
	return s, nil
}

// GetStage returns the stage with id. If there is none, the error wraps
// [ErrNotFound].
func (q *queries) GetStage(ctx context.Context, id string) (Stage, error) {
	s, err := scanStage(q.q.QueryRowContext(ctx, "SELECT "+stageColumns+" FROM stages WHERE id = ?", id))
	if err != nil {
		return Stage{}, fmt.Errorf("get stage %s: %w", id, notFound(err))
	}
	return s, nil
}

// ListStages returns the workspace's stages in every state, oldest first
// (by creation time, then id).
func (q *queries) ListStages(ctx context.Context, workspaceID string) ([]Stage, error) {
	rows, err := q.q.QueryContext(ctx,
		"SELECT "+stageColumns+" FROM stages WHERE workspace_id = ? ORDER BY created_at, id", workspaceID)
	if err != nil {
		return nil, fmt.Errorf("list stages of %s: %w", workspaceID, classify(err))
	}
	list, err := collect(rows, scanStage)
	if err != nil {
		return nil, fmt.Errorf("list stages of %s: %w", workspaceID, err)
	}
	return list, nil
}

// collect scans every row with scan and closes rows.
func collect[T any](rows *sql.Rows, scan func(rowScanner) (T, error)) ([]T, error) {
	defer rows.Close()
	var list []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		list = append(list, v)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	return list, nil
}

func checkOp(o Op) error {
	switch {
	case o.ID == "":
		return errors.New("op id is required")
	case o.WorkspaceID == "":
		return errors.New("workspace id is required")
	case o.State == "":
		return errors.New("op state is required")
	case o.CreatedAt.IsZero():
		return errors.New("created time is required")
	case o.Kind != OpApply && o.Kind != OpUndo:
		return fmt.Errorf("unknown op kind %q", o.Kind)
	}
	return nil
}

// InsertOp records a new op. If o.ID is already recorded, the error wraps
// [ErrExists].
func (q *queries) InsertOp(ctx context.Context, o Op) error {
	if err := checkOp(o); err != nil {
		return fmt.Errorf("insert op %s: %w", o.ID, err)
	}
	body, err := jsonArg("body", o.Body)
	if err != nil {
		return fmt.Errorf("insert op %s: %w", o.ID, err)
	}
	// The op_undoes table is the schema's to keep (migration 006's
	// triggers), for whichever program writes the row.
	_, err = q.q.ExecContext(ctx, `INSERT INTO ops (id, workspace_id, stage_id, kind, state, created_at, body)
		VALUES (?, ?, ?, ?, ?, ?, ?)`,
		o.ID, o.WorkspaceID, nullable(o.StageID), o.Kind, o.State, formatTime(o.CreatedAt), body)
	if err != nil {
		return fmt.Errorf("insert op %s: %w", o.ID, classify(err))
	}
	return nil
}

// UpdateOp stores o's state and body over the recorded op with o.ID. If the
// op is not recorded, the error wraps [ErrNotFound].
func (q *queries) UpdateOp(ctx context.Context, o Op) error {
	if o.State == "" {
		return fmt.Errorf("update op %s: op state is required", o.ID)
	}
	body, err := jsonArg("body", o.Body)
	if err != nil {
		return fmt.Errorf("update op %s: %w", o.ID, err)
	}
	res, err := q.q.ExecContext(ctx, "UPDATE ops SET state = ?, body = ? WHERE id = ?", o.State, body, o.ID)
	if err != nil {
		return fmt.Errorf("update op %s: %w", o.ID, classify(err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("update op %s: %w", o.ID, err)
	} else if n == 0 {
		return fmt.Errorf("update op %s: %w", o.ID, ErrNotFound)
	}
	return nil
}

const opColumns = "id, workspace_id, stage_id, kind, state, created_at, body"

func scanOp(r rowScanner) (Op, error) {
	var o Op
	var stage, body sql.NullString
	var created string
	if err := r.Scan(&o.ID, &o.WorkspaceID, &stage, &o.Kind, &o.State, &created, &body); err != nil {
		return Op{}, err
	}
	o.StageID, o.Body = stage.String, jsonValue(body)
	var err error
	if o.CreatedAt, err = parseTime(created); err != nil {
		return Op{}, err
	}
	return o, nil
}

// GetOp returns the op with id. If there is none, the error wraps
// [ErrNotFound].
func (q *queries) GetOp(ctx context.Context, id string) (Op, error) {
	o, err := scanOp(q.q.QueryRowContext(ctx, "SELECT "+opColumns+" FROM ops WHERE id = ?", id))
	if err != nil {
		return Op{}, fmt.Errorf("get op %s: %w", id, notFound(err))
	}
	return o, nil
}

// ListOps returns the workspace's ops, oldest first (by creation time, then
// id).
func (q *queries) ListOps(ctx context.Context, workspaceID string) ([]Op, error) {
	rows, err := q.q.QueryContext(ctx,
		"SELECT "+opColumns+" FROM ops WHERE workspace_id = ? ORDER BY created_at, id", workspaceID)
	if err != nil {
		return nil, fmt.Errorf("list ops of %s: %w", workspaceID, classify(err))
	}
	list, err := collect(rows, scanOp)
	if err != nil {
		return nil, fmt.Errorf("list ops of %s: %w", workspaceID, err)
	}
	return list, nil
}

// OpLink is what places an op in its workspace's history without its body:
// its id, kind and stage, and the op it undoes.
type OpLink struct {
	ID      string
	Kind    string // OpApply or OpUndo
	StageID string // "" when the op belongs to no stage
	Undoes  string // the op an undo takes back; "" for an apply
}

// ListOpLinks returns the link of each of the workspace's ops (id, kind,
// stage, the op it undoes), oldest first as [queries.ListOps], without
// reading the ops' bodies: what finding one op among many, or a stage's
// ops, needs.
func (q *queries) ListOpLinks(ctx context.Context, workspaceID string) ([]OpLink, error) {
	rows, err := q.q.QueryContext(ctx,
		"SELECT o.id, o.kind, COALESCE(o.stage_id, ''), COALESCE(u.undoes, '') FROM ops o LEFT JOIN op_undoes u ON u.op_id = o.id "+
			"WHERE o.workspace_id = ? ORDER BY o.created_at, o.id", workspaceID)
	if err != nil {
		return nil, fmt.Errorf("list ops of %s: %w", workspaceID, classify(err))
	}
	list, err := collect(rows, func(r rowScanner) (OpLink, error) {
		var l OpLink
		err := r.Scan(&l.ID, &l.Kind, &l.StageID, &l.Undoes)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("list ops of %s: %w", workspaceID, err)
	}
	return list, nil
}

func checkReceipt(r Receipt) error {
	switch {
	case r.ID == "":
		return errors.New("receipt id is required")
	case r.WorkspaceID == "":
		return errors.New("workspace id is required")
	case r.StageID == "":
		return errors.New("stage id is required")
	case r.CreatedAt.IsZero():
		return errors.New("created time is required")
	case r.Kind != ReceiptRun && r.Kind != ReceiptApply && r.Kind != ReceiptUndo:
		return fmt.Errorf("unknown receipt kind %q", r.Kind)
	}
	return nil
}

// InsertReceipt records a new receipt. Receipts are never changed. If r.ID
// is already recorded, the error wraps [ErrExists].
func (q *queries) InsertReceipt(ctx context.Context, r Receipt) error {
	if err := checkReceipt(r); err != nil {
		return fmt.Errorf("insert receipt %s: %w", r.ID, err)
	}
	body, err := jsonArg("body", r.Body)
	if err != nil {
		return fmt.Errorf("insert receipt %s: %w", r.ID, err)
	}
	_, err = q.q.ExecContext(ctx, `INSERT INTO receipts (id, kind, workspace_id, stage_id, op_id, created_at, body)
		VALUES (?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.Kind, r.WorkspaceID, r.StageID, nullable(r.OpID), formatTime(r.CreatedAt), body)
	if err != nil {
		return fmt.Errorf("insert receipt %s: %w", r.ID, classify(err))
	}
	return nil
}

const receiptColumns = "id, kind, workspace_id, stage_id, op_id, created_at, body"

func scanReceipt(rs rowScanner) (Receipt, error) {
	var r Receipt
	var op, body sql.NullString
	var created string
	if err := rs.Scan(&r.ID, &r.Kind, &r.WorkspaceID, &r.StageID, &op, &created, &body); err != nil {
		return Receipt{}, err
	}
	r.OpID, r.Body = op.String, jsonValue(body)
	var err error
	if r.CreatedAt, err = parseTime(created); err != nil {
		return Receipt{}, err
	}
	return r, nil
}

// GetReceipt returns the receipt with id. If there is none, the error wraps
// [ErrNotFound].
func (q *queries) GetReceipt(ctx context.Context, id string) (Receipt, error) {
	r, err := scanReceipt(q.q.QueryRowContext(ctx, "SELECT "+receiptColumns+" FROM receipts WHERE id = ?", id))
	if err != nil {
		return Receipt{}, fmt.Errorf("get receipt %s: %w", id, notFound(err))
	}
	return r, nil
}

// ReceiptsForStage returns the stage's receipts, oldest first (by creation
// time, then id).
func (q *queries) ReceiptsForStage(ctx context.Context, stageID string) ([]Receipt, error) {
	rows, err := q.q.QueryContext(ctx,
		"SELECT "+receiptColumns+" FROM receipts WHERE stage_id = ? ORDER BY created_at, id", stageID)
	if err != nil {
		return nil, fmt.Errorf("receipts of %s: %w", stageID, classify(err))
	}
	list, err := collect(rows, scanReceipt)
	if err != nil {
		return nil, fmt.Errorf("receipts of %s: %w", stageID, err)
	}
	return list, nil
}
