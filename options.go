package wtx

import (
	"log/slog"
	"time"
)

// Options configure a Workspace. The library reads no environment variable
// and no configuration file: the caller (the wtx command) fills these in.
type Options struct {
	// StateDir is the state root: an absolute path outside the workspace.
	// Required.
	StateDir string
	// Home is the user's home directory; it is refused as a workspace.
	Home string
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// InStage is what the caller's environment says about a stage it runs
	// in (WTX_TX, WTX_WORKSPACE); Open refuses a workspace inside a stage
	// (precondition.inside-stage), which it also finds without it: by the
	// view's path, its mount, and the stage's supervising process (whose
	// environment, not the caller's, it then reads from /proc).
	InStage InStage
	// Discover treats the directory given to Open as where the caller
	// stands rather than as the workspace: the workspace is the nearest
	// directory at or above it that the state root knows as a workspace
	// with stages (a subdirectory that is one wins over its parent), else
	// the root of the enclosing git repository (a directory holding .git),
	// else the directory itself. A repository root that could not be a
	// workspace (the home directory, one holding the state root) is passed
	// over; one another user owns is refused (SafeDirectories).
	// Workspace.Found says which.
	Discover bool
	// SafeDirectories are the directories whose workspace boundary (.git,
	// .wtx.toml) and project file the caller trusts whoever owns them, as
	// git's safe.directory (T-004). Without one, a boundary that discovery
	// finds and a project file are obeyed only when they and their
	// directory are owned by the caller or root (and the project file and
	// its directory are not writable by every user, unless sticky); else
	// Open or Begin refuses them with precondition.untrusted-owner. Each
	// entry is an absolute directory (that directory), the same followed
	// by "/*" (it and every directory below it), or SafeAll.
	SafeDirectories []string
	// SudoUID is, for a caller running as root on behalf of a user (sudo's
	// SUDO_UID), that user: what they own counts as the caller's. Ignored
	// unless the caller is root.
	SudoUID int
	// NoRecover skips the recovery of interrupted applies that Open
	// otherwise runs first (for a caller that recovers explicitly).
	NoRecover bool
	// Progress, if set, hears now and then how far a long operation got
	// (apply, undo, diff, gc, a copy backend's view): see Progress. It is
	// called often and must return quickly.
	Progress func(Progress)
	// Actor is who the workspace acts for: every apply, undo, drop and
	// new stage is checked against its row of the authority table (T-003).
	// The zero value is a person.
	Actor Actor
}

// BeginOptions configure a new stage.
type BeginOptions struct {
	// Name is an optional name, unique among the workspace's open stages.
	Name string
	// Exclude selectors are left out of the view and never applied.
	Exclude []string
	// Share selectors are seen by the view as the workspace's own copy and
	// written through, untransacted. Needs a backend that can bind them.
	Share []string
	// Protect selectors make an apply that touches them need Approve.
	Protect []string
	// Backend is "auto", "overlay", "clone" or "copy"; empty takes the
	// project file's backend, else "auto".
	Backend string
	// NoProject ignores the workspace's project file (.wtx.toml). Without
	// it, Begin gives the stage the file's excludes and protects ahead of
	// Exclude and Protect, and its backend when Backend is empty.
	NoProject bool
	// projectMerged: the project file's settings are in the options
	// already (Batch folds them in to check its ops first); Begin adds
	// them no more, and the stage is not one opened without them.
	projectMerged bool
	// Progress, if set, is called while the view is made with the number of
	// entries staged so far.
	Progress func(done int)
	// At, when set, is an op of the workspace (id or unique prefix): the
	// stage's view and base are then the workspace as it was right after
	// that op, every later op's writes set back from their recorded
	// pre-images. The workspace itself is not touched.
	At string
}

// ApplyOptions select what an apply writes and which checks it relaxes.
type ApplyOptions struct {
	// Paths are selectors; empty means the whole change set.
	Paths []string
	// Exclude selectors leave part of the selection out: it stays staged.
	Exclude []string
	// Approve allows changes to protected paths.
	Approve bool
	// DryRun runs every check and reports what would be written, writing
	// nothing.
	DryRun bool
	// Expect, when set, is the changeset digest the caller reviewed; the
	// apply is refused if the selected change set no longer has it.
	Expect string
	// IgnoreStaleReads applies even if files the stage read changed in the
	// workspace since.
	IgnoreStaleReads bool
	// Progress, if set, is called now and then while the apply writes, with
	// the steps done and the steps in all.
	Progress func(done, total int)
	// Hunks, keyed by path, applies only the chosen hunks of a text file
	// modified in the stage, numbered from 1 in diff order as wtx diff
	// --hunks shows them (with HunkContext lines of context). The path's
	// post-image is its base content with those hunks applied, its base in
	// the stage advances to exactly that, and the other hunks stay staged.
	// Each path must be part of the selection (Paths). Expect is checked
	// against the selection before it is narrowed to hunks.
	Hunks map[string][]int

	// actor, when set, is who applies instead of the workspace's actor:
	// a flow's agent step.
	actor *Actor

	// Annotate, when set, is called once the apply knows its op (its id,
	// what it writes, its receipt), before it writes anything in the
	// workspace; the Annotation it returns (nil: none) is recorded with the
	// op, in the op's own transaction, by the recorder its kind names, also
	// when a crash leaves the op to recovery. An error from it refuses the
	// apply. Package flow records a step's result this way (W-001).
	Annotate func(AppliedOp) (*Annotation, error)
}
