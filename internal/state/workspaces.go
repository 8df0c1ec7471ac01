package state

import (
	"context"
	"fmt"
)

// ListWorkspaces returns every workspace the state root knows, by path.
// The blob store is shared by them all, so whoever collects garbage in it
// must look at every workspace's records.
func (q *queries) ListWorkspaces(ctx context.Context) ([]Workspace, error) {
	rows, err := q.q.QueryContext(ctx, "SELECT id, path, created_at FROM workspaces ORDER BY path")
	if err != nil {
		return nil, fmt.Errorf("list workspaces: %w", classify(err))
	}
	list, err := collect(rows, func(r rowScanner) (Workspace, error) {
		var w Workspace
		var at string
		if err := r.Scan(&w.ID, &w.Path, &at); err != nil {
			return w, err
		}
		t, err := parseTime(at)
		w.CreatedAt = t
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("list workspaces: %w", err)
	}
	return list, nil
}
