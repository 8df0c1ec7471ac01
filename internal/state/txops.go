package state

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// TxOp is one per-file operation (or command run) inside a stage, numbered
// from 1 in the order they happened.
type TxOp struct {
	StageID   string
	Seq       int
	Kind      string // "write", "edit", "rm", "read" or "run"
	Body      json.RawMessage
	CreatedAt time.Time
}

// Read is one entry of a stage's read set.
type Read struct {
	StageID string
	Path    string
	Digest  string
	Seq     int
	ReadAt  time.Time
}

// NextTxOpSeq returns the number the stage's next op gets.
func (q *queries) NextTxOpSeq(ctx context.Context, stageID string) (int, error) {
	var n int
	err := q.q.QueryRowContext(ctx, "SELECT COALESCE(MAX(seq), 0) + 1 FROM tx_ops WHERE stage_id = ?", stageID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("next op of %s: %w", stageID, classify(err))
	}
	return n, nil
}

// InsertTxOp records an op. A taken (stage, seq) wraps [ErrExists].
func (q *queries) InsertTxOp(ctx context.Context, o TxOp) error {
	body, err := jsonArg("body", o.Body)
	if err != nil || body == nil {
		return fmt.Errorf("insert op %d of %s: body is required: %v", o.Seq, o.StageID, err)
	}
	_, err = q.q.ExecContext(ctx, "INSERT INTO tx_ops (stage_id, seq, kind, created_at, body) VALUES (?, ?, ?, ?, ?)",
		o.StageID, o.Seq, o.Kind, formatTime(o.CreatedAt), body)
	if err != nil {
		return fmt.Errorf("insert op %d of %s: %w", o.Seq, o.StageID, classify(err))
	}
	return nil
}

// ListTxOps returns the stage's ops in order.
func (q *queries) ListTxOps(ctx context.Context, stageID string) ([]TxOp, error) {
	return q.listTxOps(ctx, stageID, "SELECT stage_id, seq, kind, created_at, body FROM tx_ops WHERE stage_id = ? ORDER BY seq")
}

// ListTxOpsContaining returns, in order, the stage's ops of kind whose
// body holds the bytes word: a filter the database applies before any
// body is copied out, for a caller that decodes and checks each one (a
// run's body carries every file it changed).
func (q *queries) ListTxOpsContaining(ctx context.Context, stageID, kind, word string) ([]TxOp, error) {
	return q.listTxOps(ctx, stageID, "SELECT stage_id, seq, kind, created_at, body FROM tx_ops WHERE stage_id = ? AND kind = ? AND instr(body, ?) > 0 ORDER BY seq", stageID, kind, word)
}

// ListTxOpsWith is ListTxOpsContaining for ops of any of kinds (at least
// one).
func (q *queries) ListTxOpsWith(ctx context.Context, stageID string, kinds []string, word string) ([]TxOp, error) {
	if len(kinds) == 0 {
		return nil, fmt.Errorf("list ops of %s: no kind given", stageID)
	}
	args := []any{stageID}
	marks := make([]string, len(kinds))
	for i, k := range kinds {
		marks[i] = "?"
		args = append(args, k)
	}
	args = append(args, word)
	return q.listTxOps(ctx, stageID, "SELECT stage_id, seq, kind, created_at, body FROM tx_ops WHERE stage_id = ? AND kind IN ("+
		strings.Join(marks, ", ")+") AND instr(body, ?) > 0 ORDER BY seq", args...)
}

func (q *queries) listTxOps(ctx context.Context, stageID, query string, args ...any) ([]TxOp, error) {
	if len(args) == 0 {
		args = []any{stageID}
	}
	rows, err := q.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list ops of %s: %w", stageID, classify(err))
	}
	return collect(rows, func(r rowScanner) (TxOp, error) {
		var o TxOp
		var created string
		var body []byte
		if err := r.Scan(&o.StageID, &o.Seq, &o.Kind, &created, &body); err != nil {
			return o, err
		}
		o.Body = json.RawMessage(body)
		t, err := parseTime(created)
		o.CreatedAt = t
		return o, err
	})
}

// UpdateTxOpBody replaces the body of op seq of the stage. If there is no
// such op, the error wraps [ErrNotFound].
func (q *queries) UpdateTxOpBody(ctx context.Context, stageID string, seq int, body json.RawMessage) error {
	b, err := jsonArg("body", body)
	if err != nil || b == nil {
		return fmt.Errorf("update op %d of %s: body is required: %v", seq, stageID, err)
	}
	res, err := q.q.ExecContext(ctx, "UPDATE tx_ops SET body = ? WHERE stage_id = ? AND seq = ?", b, stageID, seq)
	if err != nil {
		return fmt.Errorf("update op %d of %s: %w", seq, stageID, classify(err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("update op %d of %s: %w", seq, stageID, err)
	} else if n == 0 {
		return fmt.Errorf("update op %d of %s: %w", seq, stageID, ErrNotFound)
	}
	return nil
}

// DeleteTxOpsFrom removes op seq and every later op of the stage, and the
// reads they recorded.
func (q *queries) DeleteTxOpsFrom(ctx context.Context, stageID string, seq int) error {
	if _, err := q.q.ExecContext(ctx, "DELETE FROM tx_ops WHERE stage_id = ? AND seq >= ?", stageID, seq); err != nil {
		return fmt.Errorf("drop ops of %s from %d: %w", stageID, seq, classify(err))
	}
	if _, err := q.q.ExecContext(ctx, "DELETE FROM read_set WHERE stage_id = ? AND seq >= ?", stageID, seq); err != nil {
		return fmt.Errorf("drop reads of %s from %d: %w", stageID, seq, classify(err))
	}
	return nil
}

// PutRead records (or refreshes) that the stage read path with digest.
func (q *queries) PutRead(ctx context.Context, r Read) error {
	_, err := q.q.ExecContext(ctx, `INSERT INTO read_set (stage_id, path, digest, seq, read_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (stage_id, path) DO UPDATE SET digest = excluded.digest, seq = excluded.seq, read_at = excluded.read_at`,
		r.StageID, r.Path, r.Digest, r.Seq, formatTime(r.ReadAt))
	if err != nil {
		return fmt.Errorf("record read of %s in %s: %w", r.Path, r.StageID, classify(err))
	}
	return nil
}

// ReadSet returns the stage's reads, by path.
func (q *queries) ReadSet(ctx context.Context, stageID string) ([]Read, error) {
	rows, err := q.q.QueryContext(ctx, "SELECT stage_id, path, digest, seq, read_at FROM read_set WHERE stage_id = ? ORDER BY path", stageID)
	if err != nil {
		return nil, fmt.Errorf("read set of %s: %w", stageID, classify(err))
	}
	return collect(rows, func(r rowScanner) (Read, error) {
		var x Read
		var at string
		if err := r.Scan(&x.StageID, &x.Path, &x.Digest, &x.Seq, &at); err != nil {
			return x, err
		}
		t, err := parseTime(at)
		x.ReadAt = t
		return x, err
	})
}
