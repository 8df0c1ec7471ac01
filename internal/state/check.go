package state

import (
	"context"
	"fmt"
)

// IntegrityCheck runs SQLite's integrity check over the whole database and
// returns the problems it reports; none means the file is sound.
func (db *DB) IntegrityCheck(ctx context.Context) ([]string, error) {
	rows, err := db.pool.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		return nil, fmt.Errorf("integrity check %s: %w", db.path, classify(err))
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, fmt.Errorf("integrity check %s: %w", db.path, classify(err))
		}
		if s != "ok" {
			out = append(out, s)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("integrity check %s: %w", db.path, classify(err))
	}
	return out, nil
}

// LatestSchema is the newest schema version this binary knows.
func LatestSchema() int {
	ms, err := loadMigrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}
