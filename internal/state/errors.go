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
	}
	return err
}

// isNotADB reports whether err says the file is not an SQLite database.
func isNotADB(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_NOTADB
}
