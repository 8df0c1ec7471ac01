// Package stage makes staged views of a workspace: trees that a command can
// change freely while the workspace stays as it was.
//
// # Vocabulary
//
// A [Backend] is one way of making a view: [Overlay] (Linux: an overlay
// mount, built in the namespaces of the command's supervisor), [Clone]
// (reflinked copies where the filesystem has them) and [Copy] (plain
// copies, everywhere); [Backends] lists this platform's in the order
// "auto" tries them. [Backend.Open] records the base [tree.Manifest] of
// the workspace and makes a [View]: the staged tree plus what it takes to
// run a command inside it. [View.Scan] lists the view's entries so that
// tree.Compare can tell the change set; [View.OpenFile] reads staged
// content without following links.
//
// Backends differ in cost, never in meaning: every backend passes the same
// conformance suite.
package stage
