package state

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// ApplicationID is the SQLite application id of a wtx state database
// ("wtx1" in ASCII).
const ApplicationID = 0x77747831

// busyTimeout is how long a write waits for another writer, in milliseconds.
const busyTimeout = 10000

//go:embed migrations/*.sql
var migrationFS embed.FS

// A migration is one numbered schema step.
type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations returns the embedded migrations in order. Versions must
// run 1, 2, 3, … without gaps.
func loadMigrations() ([]migration, error) {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive number and '_'", base)
		}
		body, err := migrationFS.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", base, err)
		}
		ms = append(ms, migration{version: v, name: base, sql: string(body)})
	}
	slices.SortFunc(ms, func(a, b migration) int { return a.version - b.version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: version %d, want %d", m.name, m.version, i+1)
		}
	}
	if len(ms) == 0 {
		return nil, errors.New("no migrations embedded")
	}
	return ms, nil
}

// A DB is an open state database. It is safe for concurrent use.
type DB struct {
	queries
	pool *sql.DB
	path string
}

// A Txn is a write transaction begun by [DB.Tx]. It offers the same record
// methods as [DB]; they see and make changes inside the transaction. A Txn
// must not be used after the function it was passed to returns.
type Txn struct {
	queries
}

// dsn returns the driver's data source name for the file at the absolute
// path p with the given query parameters.
func dsn(p string, params ...string) string {
	// SQLite decodes %HH in URI file names; escape what would otherwise
	// end the path or be decoded.
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.ToSlash(p))
	return "file:" + esc + "?" + strings.Join(params, "&")
}

// Open opens the state database at path, creating it if it does not exist
// (its directory must exist), and brings its schema up to date. It refuses a
// file that is not a wtx state database with an error wrapping [ErrForeign],
// without changing that file, and a database whose schema is newer than this
// binary knows with an error wrapping [ErrTooNew]. Several processes may
// open, and create, the same file at once.
func Open(ctx context.Context, path string) (*DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open state %s: %w", path, err)
	}
	ms, err := loadMigrations()
	if err != nil {
		return nil, fmt.Errorf("open state %s: %w", abs, err)
	}
	// While another process creates the database and switches it to WAL
	// mode, SQLite can report it busy without waiting; such a collision
	// happens once in the life of a file, so retry for a while.
	deadline := time.Now().Add(busyTimeout * time.Millisecond)
	delay := 2 * time.Millisecond
	for {
		db, err := open(ctx, abs, ms)
		if err == nil {
			return db, nil
		}
		if !errors.Is(err, ErrBusy) || time.Now().After(deadline) {
			return nil, fmt.Errorf("open state %s: %w", abs, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("open state %s: %w", abs, errors.Join(err, ctx.Err()))
		case <-time.After(delay):
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// open is one attempt of Open on the absolute path p.
func open(ctx context.Context, p string, ms []migration) (*DB, error) {
	// Check the file is ours before the real connection's pragmas switch
	// it to WAL mode.
	if err := probe(ctx, p); err != nil {
		return nil, err
	}
	pool, err := sql.Open("sqlite", dsn(p,
		"_pragma=journal_mode(WAL)",
		"_pragma=synchronous(FULL)",
		"_pragma=busy_timeout("+strconv.Itoa(busyTimeout)+")",
		"_pragma=foreign_keys(1)",
		"_txlock=immediate",
	))
	if err != nil {
		return nil, err
	}
	// Each connection has its own page cache; a writer and a reader are
	// enough for a command-line process.
	pool.SetMaxOpenConns(2)
	db := &DB{queries: queries{q: pool}, pool: pool, path: p}
	if err := db.migrate(ctx, ms); err != nil {
		pool.Close()
		return nil, err
	}
	return db, nil
}

// probe refuses a file that is not an SQLite database, or one that carries
// another application id, or no id but tables of its own. It does not write
// to the file (it creates an empty one if the file is missing).
func probe(ctx context.Context, p string) error {
	pool, err := sql.Open("sqlite", dsn(p, "_pragma=busy_timeout("+strconv.Itoa(busyTimeout)+")"))
	if err != nil {
		return err
	}
	defer pool.Close()
	// One statement, so both answers come from the same snapshot of a
	// database another process may be creating.
	var id int64
	var objects int
	err = pool.QueryRowContext(ctx,
		"SELECT (SELECT application_id FROM pragma_application_id()), (SELECT count(*) FROM sqlite_schema)").
		Scan(&id, &objects)
	if err != nil {
		if isNotADB(err) {
			return fmt.Errorf("%w: %w", ErrForeign, err)
		}
		return classify(err)
	}
	switch id {
	case ApplicationID:
		return nil
	case 0:
		// A new database, or one interrupted before its first migration
		// committed, has no tables yet.
		if objects > 0 {
			return fmt.Errorf("%w: an SQLite database of another application (%d schema objects)", ErrForeign, objects)
		}
		return nil
	default:
		return fmt.Errorf("%w: SQLite application id %#x", ErrForeign, id)
	}
}

// schemaVersion returns the highest applied migration, or 0 for a new
// database.
func schemaVersion(ctx context.Context, q querier) (int, error) {
	var n int
	err := q.QueryRowContext(ctx,
		"SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'").Scan(&n)
	if err != nil || n == 0 {
		return 0, classify(err)
	}
	var v int
	if err := q.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&v); err != nil {
		return 0, classify(err)
	}
	return v, nil
}

// migrate applies the migrations the database lacks, each in its own write
// transaction. A database that is up to date is only read.
func (db *DB) migrate(ctx context.Context, ms []migration) error {
	latest := ms[len(ms)-1].version
	cur, err := schemaVersion(ctx, db.pool)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if cur > latest {
		return fmt.Errorf("schema version %d, this wtx knows up to %d: %w", cur, latest, ErrTooNew)
	}
	for _, m := range ms[cur:] {
		err := db.Tx(ctx, func(tx *Txn) error {
			// Another process may have migrated since the read above;
			// inside the write lock the answer is final.
			cur, err := schemaVersion(ctx, tx.q)
			if err != nil {
				return err
			}
			if cur > latest {
				return fmt.Errorf("schema version %d, this wtx knows up to %d: %w", cur, latest, ErrTooNew)
			}
			if cur >= m.version {
				return nil
			}
			stmts := []string{
				"CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL) STRICT",
				m.sql,
				"PRAGMA application_id = " + strconv.Itoa(ApplicationID),
			}
			for _, s := range stmts {
				if _, err := tx.q.ExecContext(ctx, s); err != nil {
					return classify(err)
				}
			}
			_, err = tx.q.ExecContext(ctx, "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
				m.version, formatTime(time.Now()))
			return classify(err)
		})
		if err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
	}
	return nil
}

// Path returns the database file's absolute path.
func (db *DB) Path() string { return db.path }

// Close closes the database.
func (db *DB) Close() error {
	if err := db.pool.Close(); err != nil {
		return fmt.Errorf("close state %s: %w", db.path, err)
	}
	return nil
}

// SchemaVersion returns the number of the newest migration applied to the
// database.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	v, err := schemaVersion(ctx, db.pool)
	if err != nil {
		return 0, fmt.Errorf("schema version %s: %w", db.path, err)
	}
	return v, nil
}

// Tx runs fn inside one write transaction and commits it if fn returns nil.
// If fn returns an error or panics, every change it made is rolled back and
// the error (or panic) is passed on. The transaction holds the database's
// write lock from its start; fn must not begin another transaction.
func (db *DB) Tx(ctx context.Context, fn func(tx *Txn) error) (err error) {
	stx, err := db.pool.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction %s: %w", db.path, classify(err))
	}
	committed := false
	defer func() {
		if !committed {
			if rbErr := stx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
				err = errors.Join(err, fmt.Errorf("roll back %s: %w", db.path, rbErr))
			}
		}
	}()
	if err := fn(&Txn{queries: queries{q: stx}}); err != nil {
		return err
	}
	if err := stx.Commit(); err != nil {
		return fmt.Errorf("commit %s: %w", db.path, classify(err))
	}
	committed = true
	return nil
}
