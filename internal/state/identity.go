package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Ident is what identifies a directory on this machine: its device and
// inode numbers.
type Ident struct {
	Dev, Ino uint64
}

// ResolveWorkspace returns the workspace that the directory ident, opened
// through the canonical path, is: the one recorded with that device and
// inode, whatever path it was recorded under; else the one first recorded
// under path (whose identity it takes: a row from before identities were
// recorded, or a directory replaced at that path); else a new one with
// id. The path is remembered as one of the workspace's paths. With
// pathOnly, the identity is ignored and the workspace is the one of path,
// as before identities were recorded.
//
// Inode numbers are reused: a record found by identity counts only if
// still(p) holds for one of its recorded paths (that path still reaches
// this directory). Otherwise the directory it was recorded for is gone,
// and the record loses its identity.
func (db *DB) ResolveWorkspace(ctx context.Context, id, path string, ident Ident, now time.Time, pathOnly bool, still func(path string) bool) (Workspace, error) {
	if id == "" || path == "" {
		return Workspace{}, fmt.Errorf("resolve workspace %s: id and path are required", path)
	}
	var w Workspace
	err := db.Tx(ctx, func(tx *Txn) error {
		var err error
		found := false
		if !pathOnly {
			w, err = tx.workspaceWhere(ctx, "dev = ? AND ino = ?", int64(ident.Dev), int64(ident.Ino))
			found = err == nil
			if err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
			if found && w.Path != path && still != nil {
				paths, err := tx.WorkspacePaths(ctx, w.ID)
				if err != nil {
					return err
				}
				live := false
				for _, p := range append(paths, w.Path) {
					if p != path && still(p) {
						live = true
						break
					}
				}
				if !live {
					if _, err := tx.q.ExecContext(ctx, "UPDATE workspaces SET dev = NULL, ino = NULL WHERE id = ?", w.ID); err != nil {
						return classify(err)
					}
					found = false
				}
			}
		}
		if !found {
			w, err = tx.workspaceWhere(ctx, "path = ?", path)
			switch {
			case err == nil:
				if !pathOnly {
					if _, err := tx.q.ExecContext(ctx, "UPDATE workspaces SET dev = ?, ino = ? WHERE id = ?",
						int64(ident.Dev), int64(ident.Ino), w.ID); err != nil {
						return classify(err)
					}
				}
			case errors.Is(err, ErrNotFound):
				var dev, ino any
				if !pathOnly {
					dev, ino = int64(ident.Dev), int64(ident.Ino)
				}
				if _, err := tx.q.ExecContext(ctx, "INSERT INTO workspaces (id, path, created_at, dev, ino) VALUES (?, ?, ?, ?, ?)",
					id, path, formatTime(now), dev, ino); err != nil {
					return classify(err)
				}
				w = Workspace{ID: id, Path: path, CreatedAt: now.UTC()}
			default:
				return err
			}
		}
		_, err = tx.q.ExecContext(ctx, `INSERT INTO workspace_paths (path, workspace_id, seen_at) VALUES (?, ?, ?)
			ON CONFLICT (path) DO UPDATE SET workspace_id = excluded.workspace_id, seen_at = excluded.seen_at`,
			path, w.ID, formatTime(now))
		return classify(err)
	})
	if err != nil {
		return Workspace{}, fmt.Errorf("resolve workspace %s: %w", path, err)
	}
	return w, nil
}

// workspaceWhere returns the workspace row matching cond.
func (q *queries) workspaceWhere(ctx context.Context, cond string, args ...any) (Workspace, error) {
	var w Workspace
	var at string
	err := q.q.QueryRowContext(ctx, "SELECT id, path, created_at FROM workspaces WHERE "+cond, args...).Scan(&w.ID, &w.Path, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return w, ErrNotFound
	}
	if err != nil {
		return w, classify(err)
	}
	w.CreatedAt, err = parseTime(at)
	return w, err
}

// WorkspacePaths returns every path the workspace id was opened through.
func (q *queries) WorkspacePaths(ctx context.Context, id string) ([]string, error) {
	rows, err := q.q.QueryContext(ctx, "SELECT path FROM workspace_paths WHERE workspace_id = ? ORDER BY path", id)
	if err != nil {
		return nil, fmt.Errorf("workspace paths %s: %w", id, classify(err))
	}
	list, err := collect(rows, func(r rowScanner) (string, error) {
		var p string
		return p, r.Scan(&p)
	})
	if err != nil {
		return nil, fmt.Errorf("workspace paths %s: %w", id, err)
	}
	return list, nil
}
