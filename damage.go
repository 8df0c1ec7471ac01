package wtx

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/wtx-dev/wtx/internal/fsx"
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
	root, err := fsx.OpenRoot(stateDir)
	if err != nil {
		return leftovers{}
	}
	defer root.Close()
	return countLeftoversAt(root)
}

// countLeftoversAt is countLeftovers of the open state root. What it cannot
// read (a symlink in its place included, which it does not follow) counts
// as nothing.
func countLeftoversAt(root *fsx.Root) leftovers {
	var l leftovers
	if ents, err := root.ReadDir(stagesName); err == nil {
		l.stages = len(ents)
	}
	if prefixes, err := root.ReadDir(objectsName); err == nil {
		for _, p := range prefixes {
			if ents, err := root.ReadDir(objectsName + "/" + p); err == nil {
				l.objects += len(ents)
			}
			if l.objects > 1_000_000 {
				break
			}
		}
	}
	if wss, err := root.ReadDir(workspaceDirs); err == nil {
		l.workspaces = len(wss)
		for _, w := range wss {
			if js, err := root.ReadDir(workspaceDirs + "/" + w + "/" + journalDirName); err == nil {
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
// evidence is new, and its database is created. root is the state root
// open, or nil to have it opened here (a missing state root holds nothing).
func checkDatabasePresent(stateDir string, root *fsx.Root) error {
	if root == nil {
		r, err := fsx.OpenRoot(stateDir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return stateIOError(stateDir, "open the state root", err)
		}
		defer r.Close()
		root = r
	}
	p := filepath.Join(stateDir, dbName)
	st, err := root.Lstat(dbName)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if l := countLeftoversAt(root); l.any() {
			return &Error{Code: CodeStateLost,
				Message: fmt.Sprintf("the state database %s is missing, but the state root still holds %s: the records of stages, ops and receipts (history, undo, recovery) are gone with it; wtx does not start a new, empty history on its own", p, l),
				Repairs: dbRepairs(stateDir)}
		}
		return nil
	case err != nil:
		return stateIOError(stateDir, "inspect the database", err)
	case !st.IsRegular():
		return &Error{Code: CodeCorrupt, Message: fmt.Sprintf("the state database %s is not a regular file", p), Repairs: dbRepairs(stateDir)}
	case st.Size > 0:
		return nil
	}
	// An empty file: the database is being created right now (its first
	// pages are in the write-ahead log), or it was truncated.
	if wal, err := root.Lstat(dbName + "-wal"); err == nil && wal.IsRegular() && wal.Size > 0 {
		return nil
	}
	if l := countLeftoversAt(root); l.any() {
		return &Error{Code: CodeCorrupt,
			Message: fmt.Sprintf("the state database %s is empty (zero length), but the state root still holds %s: the records of stages, ops and receipts (history, undo, recovery) are lost; wtx does not start a new, empty history on its own", p, l),
			Repairs: dbRepairs(stateDir)}
	}
	return nil
}
