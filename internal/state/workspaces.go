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

// PathsWithHistory returns every path through which a workspace that has
// a stage (open or settled) or an op was opened: the directories a command
// run below them may find as its workspace, so that log and undo find the
// ops of a workspace whose stages are all settled.
func (q *queries) PathsWithHistory(ctx context.Context) ([]string, error) {
	rows, err := q.q.QueryContext(ctx, `SELECT path FROM workspaces w WHERE EXISTS (SELECT 1 FROM stages s WHERE s.workspace_id = w.id) OR EXISTS (SELECT 1 FROM ops o WHERE o.workspace_id = w.id)
		UNION SELECT p.path FROM workspace_paths p WHERE EXISTS (SELECT 1 FROM stages s WHERE s.workspace_id = p.workspace_id) OR EXISTS (SELECT 1 FROM ops o WHERE o.workspace_id = p.workspace_id)`)
	if err != nil {
		return nil, fmt.Errorf("workspaces with history: %w", classify(err))
	}
	list, err := collect(rows, func(r rowScanner) (string, error) {
		var p string
		return p, r.Scan(&p)
	})
	if err != nil {
		return nil, fmt.Errorf("workspaces with history: %w", err)
	}
	return list, nil
}
