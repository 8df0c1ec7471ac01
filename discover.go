package wtx

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/wtx-dev/wtx/internal/failpoint"

	"github.com/wtx-dev/wtx/internal/state"
)

// Found says how Open came to the workspace it opened.
type Found int

const (
	// FoundGiven: the directory given is the workspace (Options.Discover off).
	FoundGiven Found = iota
	// FoundKnown: the nearest directory at or above the one given that the
	// state root knows as a workspace (it has stages or ops), nearer than
	// any repository root or project file.
	FoundKnown
	// FoundGitRoot: the nearest directory at or above the one given that
	// holds a .git entry.
	FoundGitRoot
	// FoundHere: the directory given: no boundary at or above it.
	FoundHere
	// FoundProject: the nearest directory at or above the one given that
	// holds a project file (.wtx.toml) and no .git entry.
	FoundProject
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
	case FoundProject:
		return "project-file"
	}
	return "unknown"
}

// Found says how the workspace was found from the directory Open was given.
func (w *Workspace) Found() Found { return w.found }

// From is the canonical directory Open was given: the workspace itself, or
// a directory below it when it was discovered.
func (w *Workspace) From() string { return w.from }

// discover finds the workspace for a command started in dir (canonical,
// already checked), the way git finds its repository: walking up from dir,
// the nearest boundary wins. A directory is a boundary when the state root
// knows it as a workspace (it has stages, open or settled, or ops), when it
// holds a .git entry (a repository's directory, or the file of a worktree
// or submodule), or when it holds a project file. So a repository or
// project below a workspace is its own workspace, and a plain directory
// below a workspace finds it even when its stages are all settled, so that
// log and undo reach its ops. With no boundary, dir itself. The directory found passes the
// same checks as one given; a repository or project root wtx may not use
// (the home directory, one that holds the state root) leaves dir as it was.
// A .git or project file that makes a boundary, in a directory the state
// root does not know, is refused when someone other than the caller or
// root owns it or its directory, unless the caller trusts it (T-004): a
// boundary another user planted above the caller would otherwise choose
// its workspace and that workspace's project file.
func discover(ctx context.Context, db *state.DB, dir, stateDir string, opts Options, trust trustPolicy) (string, Found, error) {
	known, err := db.PathsWithHistory(ctx)
	if err != nil {
		return "", 0, stateDBError(stateDir, err)
	}
	set := make(map[string]bool, len(known))
	for _, p := range known {
		set[p] = true
	}
	if failpoint.Disabled("discover-nearest") {
		// The protection off: a known workspace at or above dir wins over
		// every nearer root.
		for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
			if set[d] {
				return d, FoundKnown, nil
			}
		}
	}
	for d := dir; ; d = filepath.Dir(d) {
		found, marker := FoundKnown, ""
		switch {
		case set[d]:
		case hasEntry(d, ".git"):
			found, marker = FoundGitRoot, ".git"
		case hasEntry(d, ProjectFileName):
			found, marker = FoundProject, ProjectFileName
		default:
			if d == filepath.Dir(d) {
				return dir, FoundHere, nil
			}
			continue
		}
		if marker != "" {
			if err := trust.checkBoundary(d, marker, dir); err != nil {
				return "", 0, err
			}
		}
		if d == dir {
			return d, found, nil
		}
		if err := checkDiscovered(d, stateDir, opts); err != nil {
			var e *Error
			if found == FoundKnown || errors.As(err, &e) && e.Code == CodeInsideStage {
				return "", 0, err
			}
			return dir, FoundHere, nil
		}
		return d, found, nil
	}
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

// hasEntry says whether dir holds an entry of that name, of any type.
func hasEntry(dir, name string) bool {
	_, err := os.Lstat(filepath.Join(dir, name))
	return err == nil
}
