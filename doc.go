// Package wtx gives a directory transactions.
//
// Any command runs against a staged view of a directory; the directory itself
// stays as it was until the stage's net change is applied, whole or in part,
// all or nothing, refusing to overwrite anything that changed behind the
// stage's back.
//
// # Vocabulary
//
// The workspace is the real directory ([Open] canonicalises it). A stage
// ([Stage]) is one transaction over one workspace: a view that commands run
// in, plus everything wtx records about it. Its id looks like
// tx-20261130T081500Z-1a2b3c4d. The view is what a command run in the stage
// sees: the workspace as it was when the stage opened, plus the stage's own
// writes. The surface is the part of the workspace a stage covers: everything
// but its excluded and shared selectors. The change set ([Change]) is the net
// difference between the view and the workspace as it was when the stage
// opened. An apply ([Stage.Apply]) folds a selected part of the change set
// onto the workspace as one op, and leaves a [Receipt].
//
// # Guarantees
//
// The workspace is written only by an apply. An apply checks every selected
// path against the base recorded when the stage opened and refuses (writing
// nothing) if any changed outside the stage; it writes through directory
// handles that never follow a symlink, each file through a temporary name in
// its own directory that is synced before it is renamed into place.
//
// # State
//
// Everything wtx records lives under the state root, never in the
// workspace: an SQLite database (wtx.db), a content-addressed blob store
// (objects/), and one directory per stage (stages/ID/) holding its view and
// its base manifest. See docs/design.md for the layout.
package wtx
