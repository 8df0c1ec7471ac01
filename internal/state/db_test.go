package state

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func openTest(t *testing.T) *DB {
	t.Helper()
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func pragmaInt(t *testing.T, q querier, name string) int64 {
	t.Helper()
	var v int64
	if err := q.QueryRowContext(context.Background(), "PRAGMA "+name).Scan(&v); err != nil {
		t.Fatalf("PRAGMA %s: %v", name, err)
	}
	return v
}

func pragmaText(t *testing.T, q querier, name string) string {
	t.Helper()
	var v string
	if err := q.QueryRowContext(context.Background(), "PRAGMA "+name).Scan(&v); err != nil {
		t.Fatalf("PRAGMA %s: %v", name, err)
	}
	return v
}

func TestMigrationsEmbedded(t *testing.T) {
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		if m.version != i+1 {
			t.Errorf("migration %s has version %d, want %d", m.name, m.version, i+1)
		}
		if m.sql == "" {
			t.Errorf("migration %s is empty", m.name)
		}
	}
}

func TestOpenMigratesOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	latest := ms[len(ms)-1].version

	appliedAt := func(db *DB) []string {
		rows, err := db.pool.QueryContext(ctx, "SELECT version || ' ' || applied_at FROM schema_migrations ORDER BY version")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			got = append(got, s)
		}
		rows.Close()
		return got
	}

	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := db.SchemaVersion(ctx); err != nil || v != latest {
		t.Fatalf("SchemaVersion = %d, %v; want %d", v, err, latest)
	}
	if id := pragmaInt(t, db.pool, "application_id"); id != ApplicationID {
		t.Errorf("application_id = %#x, want %#x", id, ApplicationID)
	}
	if mode := pragmaText(t, db.pool, "journal_mode"); mode != "wal" {
		t.Errorf("journal_mode = %q, want wal", mode)
	}
	if s := pragmaInt(t, db.pool, "synchronous"); s != 2 {
		t.Errorf("synchronous = %d, want 2 (FULL)", s)
	}
	if fk := pragmaInt(t, db.pool, "foreign_keys"); fk != 1 {
		t.Errorf("foreign_keys = %d, want 1", fk)
	}
	first := appliedAt(db)
	if len(first) != len(ms) {
		t.Fatalf("schema_migrations has %d rows, want %d", len(first), len(ms))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	for range 2 {
		db, err := Open(ctx, path)
		if err != nil {
			t.Fatalf("re-open: %v", err)
		}
		again := appliedAt(db)
		db.Close()
		if len(again) != len(first) {
			t.Fatalf("re-open changed schema_migrations: %v, was %v", again, first)
		}
		for i := range first {
			if again[i] != first[i] {
				t.Fatalf("re-open re-applied a migration: %v, was %v", again, first)
			}
		}
	}
}

func TestOpenRefusesForeignFile(t *testing.T) {
	ctx := context.Background()
	// makeSQLite creates an SQLite file of another application.
	makeSQLite := func(stmts ...string) func(t *testing.T, path string) {
		return func(t *testing.T, path string) {
			raw, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			for _, s := range stmts {
				if _, err := raw.ExecContext(ctx, s); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	tests := []struct {
		name   string
		create func(t *testing.T, path string)
	}{
		{"text file", func(t *testing.T, path string) {
			if err := os.WriteFile(path, bytes.Repeat([]byte("not a database\n"), 100), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"other application id", makeSQLite("PRAGMA application_id = 1234", "CREATE TABLE t (x)")},
		{"other application id, no tables", makeSQLite("PRAGMA application_id = 1234")},
		{"no application id, own tables", makeSQLite("CREATE TABLE stages (x)")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			tt.create(t, path)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			db, err := Open(ctx, path)
			if err == nil {
				db.Close()
				t.Fatal("Open accepted a foreign file")
			}
			if !errors.Is(err, ErrForeign) {
				t.Fatalf("Open error = %v, want ErrForeign", err)
			}
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(before, after) {
				t.Error("Open changed the foreign file")
			}
			if _, err := os.Stat(path + "-wal"); err == nil {
				t.Error("Open left a WAL file beside the foreign file")
			}
		})
	}
}

func TestOpenAcceptsEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open of an empty file: %v", err)
	}
	db.Close()
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.pool.ExecContext(ctx,
		"INSERT INTO schema_migrations (version, applied_at) VALUES (9999, '2099-01-01T00:00:00.000000000Z')"); err != nil {
		t.Fatal(err)
	}
	db.Close()

	db, err = Open(ctx, path)
	if err == nil {
		db.Close()
		t.Fatal("Open accepted a newer schema")
	}
	if !errors.Is(err, ErrTooNew) {
		t.Fatalf("Open error = %v, want ErrTooNew", err)
	}
}

func TestOpenMissingDirectory(t *testing.T) {
	_, err := Open(context.Background(), filepath.Join(t.TempDir(), "no", "such", "state.db"))
	if err == nil {
		t.Fatal("Open succeeded in a missing directory")
	}
}

func TestOpenOddPath(t *testing.T) {
	// Characters that mean something in a URI must stay part of the name.
	dir := filepath.Join(t.TempDir(), "a?b#c%20d")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "state.db")
	db, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database not at its path: %v", err)
	}
}
