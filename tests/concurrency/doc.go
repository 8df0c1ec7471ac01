// Package concurrency drives several wtx processes at one workspace at
// once, with an external writer editing the workspace behind their backs,
// and checks that applies are serialised and never lose a write (C-006),
// that a stale stage is refused with repairs (TX-003), and that a killed
// lock holder never blocks the next apply.
//
// Vocabulary: a round is one process opening a stage with 'wtx run',
// which appends a line unique to that round to some shared files and
// creates a file of its own, then applying it; an external edit is a line
// the external writer appends to a shared file, in place (O_APPEND) or by
// writing a copy and renaming it over the file; a line is lost when it was
// written by an acknowledged apply or an external edit and is missing from
// the final workspace.
//
// WTX_SOAK=1 raises the counts (8 processes x 2,000 rounds, 1,000 kills).
package concurrency
