package wtx

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// leftovers counts what a state root holds besides its database: evidence
// that a database existed, and what its loss orphans.
type leftovers struct {
	stages     int // stage directories
	objects    int // stored objects
	workspaces int // workspace directories (locks, journals)
	journals   int // journals of applies
}

func (l leftovers) any() bool { return l.stages+l.objects+l.workspaces+l.journals > 0 }

func (l leftovers) String() string {
	var parts []string
	add := func(n int, one, many string) {
		switch {
		case n == 1:
			parts = append(parts, "1 "+one)
		case n > 1:
			parts = append(parts, fmt.Sprintf("%d %s", n, many))
		}
	}
	add(l.stages, "stage directory", "stage directories")
	add(l.objects, "stored object", "stored objects")
	add(l.workspaces, "workspace directory", "workspace directories")
	add(l.journals, "journal of an apply", "journals of applies")
	return strings.Join(parts, ", ")
}

// countLeftovers looks at what stateDir holds besides the database. It
// stops counting objects at a bound; the count only has to show use.
func countLeftovers(stateDir string) leftovers {
	var l leftovers
	if ents, err := os.ReadDir(filepath.Join(stateDir, stagesName)); err == nil {
		l.stages = len(ents)
	}
	if prefixes, err := os.ReadDir(filepath.Join(stateDir, objectsName)); err == nil {
		for _, p := range prefixes {
			if ents, err := os.ReadDir(filepath.Join(stateDir, objectsName, p.Name())); err == nil {
				l.objects += len(ents)
			}
			if l.objects > 1_000_000 {
				break
			}
		}
	}
	if wss, err := os.ReadDir(filepath.Join(stateDir, workspaceDirs)); err == nil {
		l.workspaces = len(wss)
		for _, w := range wss {
			if js, err := os.ReadDir(filepath.Join(stateDir, workspaceDirs, w.Name(), "journal")); err == nil {
				l.journals += len(js)
			}
		}
	}
	return l
}

// checkDatabasePresent refuses to let a new, empty database silently
// replace one that was lost (I-005): a missing database file, or an empty
// one with nothing in its write-ahead log, in a state root that shows it was
// used (stage directories, objects, workspace directories, journals) is
// reported with what was lost and a repair. A state root without such
// evidence is new, and its database is created.
func checkDatabasePresent(stateDir string) error {
	p := filepath.Join(stateDir, dbName)
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if l := countLeftovers(stateDir); l.any() {
			return &Error{Code: CodeStateLost,
				Message: fmt.Sprintf("the state database %s is missing, but the state root still holds %s: the records of stages, ops and receipts (history, undo, recovery) are gone with it; wtx does not start a new, empty history on its own", p, l),
				Repairs: dbRepairs(stateDir)}
		}
		return nil
	case err != nil:
		return stateIOError(stateDir, "inspect the database", err)
	case !fi.Mode().IsRegular():
		return &Error{Code: CodeCorrupt, Message: fmt.Sprintf("the state database %s is not a regular file", p), Repairs: dbRepairs(stateDir)}
	case fi.Size() > 0:
		return nil
	}
	// An empty file: the database is being created right now (its first
	// pages are in the write-ahead log), or it was truncated.
	if wal, err := os.Lstat(p + "-wal"); err == nil && wal.Size() > 0 {
		return nil
	}
	if l := countLeftovers(stateDir); l.any() {
		return &Error{Code: CodeCorrupt,
			Message: fmt.Sprintf("the state database %s is empty (zero length), but the state root still holds %s: the records of stages, ops and receipts (history, undo, recovery) are lost; wtx does not start a new, empty history on its own", p, l),
			Repairs: dbRepairs(stateDir)}
	}
	return nil
}
