package state

import (
	"errors"
	"fmt"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

var (
	// ErrNotFound is wrapped by errors about a record that does not exist.
	ErrNotFound = errors.New("not found")

	// ErrNameTaken is wrapped by errors from inserting or updating a stage
	// whose name another open stage of the same workspace already has.
	ErrNameTaken = errors.New("name taken by an open stage")

	// ErrExists is wrapped by errors from inserting a record whose id, or a
	// workspace whose path, is already recorded differently.
	ErrExists = errors.New("already exists")

	// ErrBusy is wrapped by errors from a write that waited for another
	// writer longer than the busy timeout.
	ErrBusy = errors.New("database is busy")

	// ErrForeign is wrapped by the error from [Open] when the file is not a
	// wtx state database.
	ErrForeign = errors.New("not a wtx state database")

	// ErrTooNew is wrapped by the error from [Open] when the database's
	// schema is newer than this binary knows.
	ErrTooNew = errors.New("schema is newer than this wtx")

	// ErrReadOnly is wrapped by errors from a write the database file or
	// its directory does not allow (a read-only file or file system).
	ErrReadOnly = errors.New("database is read-only")

	// ErrCantOpen is wrapped by errors from a database file (or its -wal or
	// -shm file) that cannot be opened or created.
	ErrCantOpen = errors.New("database cannot be opened")

	// ErrCorrupt is wrapped by errors from a database file whose content
	// is damaged.
	ErrCorrupt = errors.New("database is damaged")
)

// classify adds this package's sentinels to an error from the driver.
func classify(err error) error {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	switch code := se.Code(); {
	case code == sqlite3.SQLITE_CONSTRAINT_UNIQUE && strings.Contains(se.Error(), "stages.name"):
		return fmt.Errorf("%w: %w", ErrNameTaken, err)
	case code == sqlite3.SQLITE_CONSTRAINT_UNIQUE || code == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return fmt.Errorf("%w: %w", ErrExists, err)
	case code&0xff == sqlite3.SQLITE_BUSY || code&0xff == sqlite3.SQLITE_LOCKED:
		return fmt.Errorf("%w: %w", ErrBusy, err)
	case code&0xff == sqlite3.SQLITE_READONLY:
		return fmt.Errorf("%w: %w", ErrReadOnly, err)
	case code&0xff == sqlite3.SQLITE_CANTOPEN || code&0xff == sqlite3.SQLITE_PERM:
		return fmt.Errorf("%w: %w", ErrCantOpen, err)
	case code&0xff == sqlite3.SQLITE_CORRUPT || code&0xff == sqlite3.SQLITE_NOTADB:
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return err
}

// isNotADB reports whether err says the file is not an SQLite database.
func isNotADB(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_NOTADB
}
