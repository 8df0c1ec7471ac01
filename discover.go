package wtx

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/wtx-dev/wtx/internal/state"
)

// Found says how Open came to the workspace it opened.
type Found int

const (
	// FoundGiven: the directory given is the workspace (Options.Discover off).
	FoundGiven Found = iota
	// FoundKnown: the nearest directory at or above the one given that the
	// state root knows as a workspace with stages.
	FoundKnown
	// FoundGitRoot: the root of the git repository that encloses the
	// directory given (no workspace with stages at or above it).
	FoundGitRoot
	// FoundHere: the directory given: no workspace with stages at or above
	// it, and no git repository around it.
	FoundHere
)

// String is the name JSON answers carry.
func (f Found) String() string {
	switch f {
	case FoundGiven:
		return "given"
	case FoundKnown:
		return "workspace"
	case FoundGitRoot:
		return "git-root"
	case FoundHere:
		return "directory"
	}
	return "unknown"
}

// Found says how the workspace was found from the directory Open was given.
func (w *Workspace) Found() Found { return w.found }

// From is the canonical directory Open was given: the workspace itself, or
// a directory below it when it was discovered.
func (w *Workspace) From() string { return w.from }

// discover finds the workspace for a command started in dir (canonical,
// already checked): the nearest directory at or above dir that is a
// workspace with stages (a subdirectory that is one wins over its parent);
// else the root of the git repository around dir; else dir. The directory
// found passes the same checks as one given.
func discover(ctx context.Context, db *state.DB, dir, stateDir string, opts Options) (string, Found, error) {
	known, err := db.PathsWithStages(ctx)
	if err != nil {
		return "", 0, stateDBError(stateDir, err)
	}
	set := make(map[string]bool, len(known))
	for _, p := range known {
		set[p] = true
	}
	for d := dir; ; d = filepath.Dir(d) {
		if set[d] {
			if d != dir {
				if err := checkDiscovered(d, stateDir, opts); err != nil {
					return "", 0, err
				}
			}
			return d, FoundKnown, nil
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	root := enclosingGitRoot(dir)
	if root == "" {
		return dir, FoundHere, nil
	}
	if root != dir {
		// A repository root wtx may not use (the home directory, one that
		// holds the state root) leaves the directory given as it was.
		if err := checkDiscovered(root, stateDir, opts); err != nil {
			var e *Error
			if errors.As(err, &e) && e.Code == CodeInsideStage {
				return "", 0, err
			}
			return dir, FoundHere, nil
		}
	}
	return root, FoundGitRoot, nil
}

// checkDiscovered runs Open's checks of a workspace on a directory found
// above the one given.
func checkDiscovered(path, stateDir string, opts Options) error {
	p, err := canonicalWorkspace(path, opts.Home)
	if err != nil {
		return err
	}
	if p != path {
		return errorf(CodeUsage, "workspace %s is reached as %s", path, p)
	}
	if err := checkInsideStage(path, stateDir, opts.InStage); err != nil {
		return err
	}
	return checkStateApart(path, stateDir)
}

// enclosingGitRoot returns the nearest directory at or above dir that holds a .git
// entry (a repository's directory, or the file of a worktree or
// submodule), or "".
func enclosingGitRoot(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		if d == filepath.Dir(d) {
			return ""
		}
	}
}
